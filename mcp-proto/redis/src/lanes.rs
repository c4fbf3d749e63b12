//! [`Lanes`]: the order in which the worker runs the operations, sans-IO.
//!
//! # Theory of operation
//!
//! The seam asks that one session's operations be applied in submission order, and
//! nothing more. So each operation goes into its session's **lane** ([`Lane::of`]; the
//! service notices, which name no session, share one lane), and a lane runs one turn at a
//! time:
//!
//! - a *batch*: the stateless operations at the lane's head ([`is_stateless`]: one command
//!   each, answered from its reply alone), at most [`MAX_BATCH`] and at most the places left
//!   in flight, sent together in order; the lane's next turn starts when the batch has
//!   landed;
//! - a listen-log follow's start, in flight too, alone in its turn (one place);
//! - any other operation (or any operation at all while there is no connection), run by
//!   the worker to its end before it asks for the lane's next turn.
//!
//! At most `max_in_flight` operations are in flight over all lanes; a lane whose head needs
//! a place when there is none waits for one, the lanes in the order they began to wait. An
//! `Unfollow` has no lane of its own: while its follow is queued or starting in flight it
//! queues behind it, in the follow's lane; else it runs at once.
//!
//! This module decides; it sends nothing, holds no connection and reads no clock. The
//! worker submits operations, asks for a lane's next turn and performs it, and says when
//! a turn in flight has landed; what it must start is returned.
//!
//! # State table (one lane)
//!
//! ```text
//!  state    event                                              next     returned
//!  -------  -------------------------------------------------  -------  ---------------------
//!  Idle     submit                                             Queued   Queued(lane)
//!  Queued   next, head stateless, connected, places free       Busy     Batch(head's stateless
//!                                                                       ops, ≤ MAX_BATCH, ≤ places)
//!  Queued   next, head a Follow, connected, a place free       Busy     Follow(head)
//!  Queued   next, head stateless or a Follow, connected,       Waiting  -
//!           no place free
//!  Queued   next, any other head (or not connected)            Queued   Run(head): the worker runs
//!                                                                       it, then asks again
//!  Queued   next, queue empty                                  Idle     -
//!  Busy     landed                                             Queued   -
//!  Waiting  next_waiting, a place free (first in line)         Queued   the lane (ask it again)
//!  Busy,    next                                               same     -
//!  Waiting
//!  any      submit                                             same     Queued(lane) (queued at
//!                                                                       its tail)
//!  Queued,  hold(ops) (a failed append the worker keeps: it    Busy     - (ops back at the
//!  Busy     and what followed it in its turn)                           queue's head, in order)
//!  Busy     resume (the hold's pause is over)                  Queued   -
//! ```
//!
//! An `Unfollow` whose follow is not queued nor starting is `Now`: it runs at once.
//! Every state change goes through [`Lanes::submit`], [`Lanes::next`], [`Lanes::landed`],
//! [`Lanes::next_waiting`], [`Lanes::hold`] or [`Lanes::resume`].

use std::collections::{HashMap, VecDeque};

use mcp_proto::server::{BusMessage, StoreOp, Ticket};

/// The lane of an operation: one session's operations, or the service notices (which carry
/// no session). A lane runs one operation at a time, in submission order, its retries
/// included; different lanes run side by side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Lane {
    Session(Box<str>),
    Notices,
    /// One service record's operations (a compare-and-set reads what the previous wrote).
    Record(Box<str>),
}

impl Lane {
    /// The lane of `op`; `None` for an `Unfollow`, whose lane is its follow's.
    pub(crate) fn of(op: &StoreOp) -> Option<Lane> {
        let session = match op {
            StoreOp::Load { session }
            | StoreOp::Touch { session, .. }
            | StoreOp::Delete { session }
            | StoreOp::Publish { session, .. }
            | StoreOp::Follow { session, .. }
            | StoreOp::Delivered { session, .. }
            | StoreOp::CommitStreams { session, .. }
            | StoreOp::FollowStream { session, .. } => session,
            StoreOp::Create { record, .. } | StoreOp::Save { record, .. } => &record.id,
            StoreOp::Broadcast { message } => match message {
                BusMessage::SessionDeleted { session }
                | BusMessage::SessionSaved { session }
                | BusMessage::Cancel { session, .. }
                | BusMessage::ClientResponse { session, .. }
                | BusMessage::StreamResumed { session, .. }
                | BusMessage::ListenTaken { session, .. } => session,
                BusMessage::Notice { .. } => return Some(Lane::Notices),
            },
            StoreOp::Unfollow { .. } => return None,
            StoreOp::Record(op) => return Some(Lane::Record(op.key().into())),
        };
        Some(Lane::Session(session.clone()))
    }
}

/// A lane's operations: the one running (in flight or here) or waiting for a place in
/// flight is out of `queue`.
#[derive(Default)]
struct LaneState {
    /// An operation of the lane runs.
    busy: bool,
    /// The lane's next operation waits for a place in flight (the lane is in
    /// [`Lanes::waiting`]).
    waiting: bool,
    queue: VecDeque<(Ticket, StoreOp)>,
}

/// Whether `op` needs none of the worker's state (follows, subscriptions): one command,
/// its answer from the reply alone. Those run pipelined.
pub(crate) fn is_stateless(op: &StoreOp) -> bool {
    !matches!(
        op,
        StoreOp::Follow { .. }
            | StoreOp::FollowStream { .. }
            | StoreOp::Unfollow { .. }
            | StoreOp::Delete { .. }
    )
}

/// Operations of one lane sent together at most (a batch in flight).
pub(crate) const MAX_BATCH: usize = 64;

/// What the worker must do for a submitted operation.
#[derive(Debug, PartialEq)]
pub(crate) enum Submitted {
    /// It is queued in `0`: ask for that lane's next turn ([`Lanes::next`]).
    Queued(Lane),
    /// An `Unfollow` whose follow is neither queued nor starting: run it at once.
    Now(Ticket, StoreOp),
}

/// A lane's next turn, for the worker to perform.
#[derive(Debug, PartialEq)]
pub(crate) enum Start {
    /// Send these stateless operations together, in order, in flight; then
    /// [`Lanes::landed`].
    Batch(Vec<(Ticket, StoreOp)>),
    /// Start this follow in flight (its places counted: one); then [`Lanes::landed`].
    Follow(Ticket, StoreOp),
    /// Run this operation here to its end, then ask for the lane's next turn again.
    Run(Ticket, StoreOp),
}

/// The lanes, the places in flight and the lanes waiting for one (see the
/// [module docs](self)).
pub(crate) struct Lanes {
    /// Operations in flight at once, at most (at least 1).
    max_in_flight: usize,
    /// Operations by lane: one turn at a time per lane, in submission order.
    lanes: HashMap<Lane, LaneState>,
    /// Lanes whose next operation waits for a place in flight, in the order they asked.
    waiting: VecDeque<Lane>,
    /// The operations in flight.
    in_flight: usize,
    /// Follows not yet registered (queued in their lane, or starting in flight): an
    /// `Unfollow` of one queues behind it.
    queued_follows: HashMap<Ticket, Lane>,
}

impl Lanes {
    pub(crate) fn new(max_in_flight: usize) -> Lanes {
        Lanes {
            max_in_flight: max_in_flight.max(1),
            lanes: HashMap::new(),
            waiting: VecDeque::new(),
            in_flight: 0,
            queued_follows: HashMap::new(),
        }
    }

    /// Queues `op` in its lane (an `Unfollow` in its follow's, if that one is not yet
    /// registered).
    pub(crate) fn submit(&mut self, ticket: Ticket, op: StoreOp) -> Submitted {
        let lane = match Lane::of(&op) {
            Some(lane) => lane,
            None => match &op {
                StoreOp::Unfollow { follow } if self.queued_follows.contains_key(follow) => {
                    self.queued_follows[follow].clone()
                }
                // Its follow ran already (or never was): nothing waits for it.
                _ => return Submitted::Now(ticket, op),
            },
        };
        if matches!(op, StoreOp::Follow { .. } | StoreOp::FollowStream { .. }) {
            self.queued_follows.insert(ticket, lane.clone());
        }
        self.lanes
            .entry(lane.clone())
            .or_default()
            .queue
            .push_back((ticket, op));
        Submitted::Queued(lane)
    }

    /// `lane`'s next turn, if it is free and has one: with a connection (`connected`), the
    /// stateless operations at its head as a batch, or a follow's start, in flight (or the
    /// lane waits for a place); any other operation, or any without a connection, to run
    /// here.
    pub(crate) fn next(&mut self, lane: &Lane, connected: bool) -> Option<Start> {
        let max = self.max_in_flight;
        let state = self.lanes.get_mut(lane)?;
        if state.busy || state.waiting {
            return None;
        }
        let Some((_, op)) = state.queue.front() else {
            self.lanes.remove(lane);
            return None;
        };
        if connected && is_stateless(op) {
            let room = max.saturating_sub(self.in_flight).min(MAX_BATCH);
            if room == 0 {
                state.waiting = true;
                self.waiting.push_back(lane.clone());
                return None;
            }
            let take = state
                .queue
                .iter()
                .take(room)
                .take_while(|(_, op)| is_stateless(op))
                .count();
            let batch: Vec<(Ticket, StoreOp)> = state.queue.drain(..take).collect();
            state.busy = true;
            self.in_flight += batch.len();
            return Some(Start::Batch(batch));
        }
        if connected && matches!(op, StoreOp::Follow { .. }) {
            if self.in_flight >= max {
                state.waiting = true;
                self.waiting.push_back(lane.clone());
                return None;
            }
            let (ticket, op) = state.queue.pop_front()?;
            state.busy = true;
            self.in_flight += 1;
            return Some(Start::Follow(ticket, op));
        }
        let (ticket, op) = state.queue.pop_front()?;
        if matches!(op, StoreOp::Follow { .. } | StoreOp::FollowStream { .. }) {
            self.queued_follows.remove(&ticket);
        }
        Some(Start::Run(ticket, op))
    }

    /// A turn of `lane` in flight landed: its `ops` places are free, and `follow` (a
    /// follow's start) is registered or answered. Ask for the lane's next turn, then
    /// [`next_waiting`](Self::next_waiting).
    pub(crate) fn landed(&mut self, lane: &Lane, ops: usize, follow: Option<Ticket>) {
        self.in_flight = self.in_flight.saturating_sub(ops);
        if let Some(ticket) = follow {
            self.queued_follows.remove(&ticket);
        }
        if let Some(state) = self.lanes.get_mut(lane) {
            state.busy = false;
        }
    }

    /// `ops` of `lane` failed and are attempted again later, first (an append the worker
    /// keeps until it is applied, and what its turn held behind it): back at the lane's
    /// head, in order, the lane busy until [`resume`](Self::resume), so that nothing of
    /// the lane overtakes them. Their places in flight, if any, were freed by
    /// [`landed`](Self::landed).
    pub(crate) fn hold(&mut self, lane: &Lane, ops: Vec<(Ticket, StoreOp)>) {
        let state = self.lanes.entry(lane.clone()).or_default();
        for op in ops.into_iter().rev() {
            state.queue.push_front(op);
        }
        state.busy = true;
    }

    /// A held lane's pause is over: ask for its next turn (its held operations first).
    pub(crate) fn resume(&mut self, lane: &Lane) {
        if let Some(state) = self.lanes.get_mut(lane) {
            state.busy = false;
        }
    }

    /// The first lane waiting for a place, while places are free: ask for its next turn.
    pub(crate) fn next_waiting(&mut self) -> Option<Lane> {
        if self.in_flight >= self.max_in_flight {
            return None;
        }
        let lane = self.waiting.pop_front()?;
        if let Some(state) = self.lanes.get_mut(&lane) {
            state.waiting = false;
        }
        Some(lane)
    }

    /// The operations in flight.
    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use bytes::Bytes;
    use mcp_proto::server::FollowFrom;

    fn t(n: u64) -> Ticket {
        Ticket::from_u64(n)
    }

    fn lane(s: &str) -> Lane {
        Lane::Session(s.into())
    }

    fn touch(s: &str) -> StoreOp {
        StoreOp::Touch {
            session: s.into(),
            ttl: None,
        }
    }

    fn publish(s: &str) -> StoreOp {
        StoreOp::Publish {
            session: s.into(),
            payload: Bytes::from_static(b"x"),
            capacity: 8,
            gap: false,
        }
    }

    fn follow(s: &str) -> StoreOp {
        StoreOp::Follow {
            session: s.into(),
            from: FollowFrom::After(0),
        }
    }

    fn unfollow(n: u64) -> StoreOp {
        StoreOp::Unfollow { follow: t(n) }
    }

    /// The tickets of a turn.
    fn tickets(start: &Start) -> (&'static str, Vec<u64>) {
        match start {
            Start::Batch(ops) => ("batch", ops.iter().map(|(t, _)| t.as_u64()).collect()),
            Start::Follow(t, _) => ("follow", vec![t.as_u64()]),
            Start::Run(t, _) => ("run", vec![t.as_u64()]),
        }
    }

    /// Submits `op` as ticket `n`, expecting it queued in `s`'s lane.
    fn queue(l: &mut Lanes, n: u64, op: StoreOp, s: &str) {
        assert_eq!(l.submit(t(n), op), Submitted::Queued(lane(s)));
    }

    #[test]
    fn a_lane_s_stateless_head_goes_as_one_batch_in_order_up_to_a_stateful_one() {
        let mut l = Lanes::new(256);
        queue(&mut l, 1, touch("s"), "s");
        queue(&mut l, 2, publish("s"), "s");
        queue(
            &mut l,
            3,
            StoreOp::Delete {
                session: "s".into(),
            },
            "s",
        );
        queue(&mut l, 4, touch("s"), "s");
        let first = l.next(&lane("s"), true).expect("a batch");
        assert_eq!(tickets(&first), ("batch", vec![1, 2]));
        assert_eq!(l.in_flight(), 2);
        // One turn at a time: the lane is busy until its batch lands.
        assert_eq!(l.next(&lane("s"), true), None);
        l.landed(&lane("s"), 2, None);
        assert_eq!(l.in_flight(), 0);
        // Delete needs the worker's state: run here, then the rest as a batch.
        let run = l.next(&lane("s"), true).expect("a run");
        assert_eq!(tickets(&run), ("run", vec![3]));
        let last = l.next(&lane("s"), true).expect("a batch");
        assert_eq!(tickets(&last), ("batch", vec![4]));
        l.landed(&lane("s"), 1, None);
        assert_eq!(l.next(&lane("s"), true), None);
        assert!(l.lanes.is_empty(), "an empty lane is forgotten");
    }

    #[test]
    fn a_batch_holds_at_most_max_batch_operations() {
        let mut l = Lanes::new(1000);
        for n in 0..100 {
            queue(&mut l, n, touch("s"), "s");
        }
        let first = l.next(&lane("s"), true).expect("a batch");
        assert_eq!(tickets(&first).1, (0..64).collect::<Vec<_>>());
        l.landed(&lane("s"), 64, None);
        let second = l.next(&lane("s"), true).expect("a batch");
        assert_eq!(tickets(&second).1, (64..100).collect::<Vec<_>>());
    }

    #[test]
    fn lanes_share_the_places_in_flight_and_wait_for_them_in_order() {
        let mut l = Lanes::new(3);
        for n in 0..2 {
            queue(&mut l, n, touch("a"), "a");
        }
        queue(&mut l, 10, touch("b"), "b");
        queue(&mut l, 11, touch("b"), "b");
        queue(&mut l, 20, follow("c"), "c");
        let a = l.next(&lane("a"), true).expect("a batch");
        assert_eq!(tickets(&a).1, [0, 1]);
        // One place left: b sends one of its two.
        let b = l.next(&lane("b"), true).expect("a batch");
        assert_eq!(tickets(&b).1, [10]);
        assert_eq!(l.in_flight(), 3);
        // None left: c's follow waits; so would b's next (it is busy meanwhile).
        assert_eq!(l.next(&lane("c"), true), None);
        assert_eq!(l.next_waiting(), None, "no place free");
        l.landed(&lane("b"), 1, None);
        // b's turn is over, but c waited first: c goes, then b's next asks again.
        assert_eq!(l.next_waiting(), Some(lane("c")));
        let c = l.next(&lane("c"), true).expect("a follow");
        assert_eq!(tickets(&c), ("follow", vec![20]));
        assert_eq!(l.next(&lane("b"), true), None, "no place: b waits");
        assert_eq!(l.next_waiting(), None);
        l.landed(&lane("a"), 2, None);
        assert_eq!(l.next_waiting(), Some(lane("b")));
        assert_eq!(tickets(&l.next(&lane("b"), true).unwrap()).1, [11]);
        assert_eq!(l.next_waiting(), None, "nobody else waits");
    }

    #[test]
    fn lanes_waiting_for_a_place_go_first_come_first_served() {
        let mut l = Lanes::new(1);
        for (n, s) in [(1, "a"), (2, "b"), (3, "c"), (4, "d")] {
            queue(&mut l, n, touch(s), s);
        }
        assert_eq!(tickets(&l.next(&lane("a"), true).unwrap()).1, [1]);
        for s in ["c", "b", "d"] {
            assert_eq!(l.next(&lane(s), true), None, "{s} waits");
        }
        let mut order = Vec::new();
        let mut last = lane("a");
        for _ in 0..3 {
            l.landed(&last, 1, None);
            let next = l.next_waiting().expect("a lane waits");
            assert!(l.next(&next, true).is_some());
            assert_eq!(l.next_waiting(), None, "the place is taken again");
            order.push(next.clone());
            last = next;
        }
        assert_eq!(order, [lane("c"), lane("b"), lane("d")]);
    }

    #[test]
    fn without_a_connection_every_operation_runs_here_in_order() {
        let mut l = Lanes::new(1);
        queue(&mut l, 1, touch("s"), "s");
        queue(&mut l, 2, follow("s"), "s");
        queue(&mut l, 3, publish("s"), "s");
        for n in 1..=3 {
            let run = l.next(&lane("s"), false).expect("a run");
            assert_eq!(tickets(&run), ("run", vec![n]));
        }
        assert_eq!(l.in_flight(), 0);
        assert_eq!(l.next(&lane("s"), false), None);
    }

    #[test]
    fn a_held_publish_and_what_followed_it_go_first_once_resumed_and_nothing_overtakes() {
        let mut l = Lanes::new(8);
        queue(&mut l, 1, publish("s"), "s");
        queue(&mut l, 2, touch("s"), "s");
        let batch = l.next(&lane("s"), true).expect("a batch");
        assert_eq!(tickets(&batch).1, [1, 2]);
        queue(&mut l, 3, publish("s"), "s");
        // The batch failed: the worker keeps both, and the lane waits for the pause.
        l.landed(&lane("s"), 2, None);
        l.hold(&lane("s"), vec![(t(1), publish("s")), (t(2), touch("s"))]);
        assert_eq!(l.in_flight(), 0);
        assert_eq!(l.next(&lane("s"), true), None, "held: nothing goes");
        // Other lanes go meanwhile.
        queue(&mut l, 10, touch("o"), "o");
        assert!(l.next(&lane("o"), true).is_some());
        l.resume(&lane("s"));
        let again = l.next(&lane("s"), true).expect("a batch");
        assert_eq!(
            tickets(&again).1,
            [1, 2, 3],
            "the held ones first, in order"
        );
        // Held while running here (no connection): the same.
        l.landed(&lane("s"), 3, None);
        l.hold(&lane("s"), vec![(t(3), publish("s"))]);
        assert_eq!(l.next(&lane("s"), false), None);
        l.resume(&lane("s"));
        assert_eq!(
            tickets(&l.next(&lane("s"), false).unwrap()),
            ("run", vec![3])
        );
    }

    #[test]
    fn an_unfollow_queues_behind_its_follow_until_the_follow_has_started() {
        let mut l = Lanes::new(8);
        // An Unfollow of a follow not queued runs at once.
        assert_eq!(
            l.submit(t(9), unfollow(1)),
            Submitted::Now(t(9), unfollow(1))
        );
        queue(&mut l, 1, touch("s"), "s");
        queue(&mut l, 2, follow("s"), "s");
        // Behind its follow, in the follow's lane.
        queue(&mut l, 3, unfollow(2), "s");
        assert_eq!(
            tickets(&l.next(&lane("s"), true).unwrap()),
            ("batch", vec![1])
        );
        l.landed(&lane("s"), 1, None);
        assert_eq!(
            tickets(&l.next(&lane("s"), true).unwrap()),
            ("follow", vec![2])
        );
        // Starting in flight: another Unfollow of it still queues.
        queue(&mut l, 4, unfollow(2), "s");
        assert_eq!(l.next(&lane("s"), true), None, "busy");
        l.landed(&lane("s"), 1, Some(t(2)));
        assert_eq!(
            tickets(&l.next(&lane("s"), true).unwrap()),
            ("run", vec![3])
        );
        assert_eq!(
            tickets(&l.next(&lane("s"), true).unwrap()),
            ("run", vec![4])
        );
        // Registered: an Unfollow now runs at once.
        assert_eq!(
            l.submit(t(5), unfollow(2)),
            Submitted::Now(t(5), unfollow(2))
        );
    }

    #[test]
    fn a_follow_run_here_no_longer_holds_its_unfollows() {
        let mut l = Lanes::new(8);
        queue(&mut l, 1, follow("s"), "s");
        queue(
            &mut l,
            2,
            StoreOp::FollowStream {
                session: "s".into(),
                stream: "b.1".into(),
                after: 0,
            },
            "s",
        );
        queue(&mut l, 3, unfollow(2), "s");
        assert_eq!(
            tickets(&l.next(&lane("s"), false).unwrap()),
            ("run", vec![1])
        );
        assert_eq!(
            l.submit(t(4), unfollow(1)),
            Submitted::Now(t(4), unfollow(1))
        );
        assert_eq!(
            tickets(&l.next(&lane("s"), false).unwrap()),
            ("run", vec![2])
        );
        assert_eq!(
            l.submit(t(5), unfollow(2)),
            Submitted::Now(t(5), unfollow(2))
        );
        assert_eq!(
            tickets(&l.next(&lane("s"), false).unwrap()),
            ("run", vec![3])
        );
    }

    #[test]
    fn notices_share_one_lane_and_other_broadcasts_go_in_their_session_s() {
        let notice = StoreOp::Broadcast {
            message: BusMessage::Notice {
                from: "a".into(),
                payload: Bytes::new(),
            },
        };
        assert_eq!(Lane::of(&notice), Some(Lane::Notices));
        let saved = StoreOp::Broadcast {
            message: BusMessage::SessionSaved {
                session: "s".into(),
            },
        };
        assert_eq!(Lane::of(&saved), Some(lane("s")));
        assert_eq!(Lane::of(&unfollow(1)), None);
    }
}
