//! [`LinkMachine`]: the life of the worker's one Redis connection, sans-IO.
//!
//! # Theory of operation
//!
//! The worker holds one multiplexed connection, or none. Whether it may dial, when it dials
//! again after a failure, when a connection that keeps timing out counts as dead, and when
//! the follows waiting for a lost connection give up are decisions of this machine alone;
//! time comes in as an `Instant` with every event, and the machine reads no clock, does no
//! I/O and holds no connection. The worker does the dialing, subscribing and commands, and
//! keeps the connection object exactly while the machine is `Subscribing` or `Up`.
//!
//! A dial that fails waits `retry_backoff`, then twice that, … at most
//! `reconnect_backoff_max`; a connection that comes up resets the backoff. A command that
//! finds the connection broken loses it at once; timeouts in a row lose it once there are
//! more than `retries` of them (a connection that silently died answers nothing). Losing it
//! makes a dial due at once. A connection that comes back after being up before is a
//! recovery: bus messages may have been missed, and the follows must be read again. Follows
//! of a connection lost for `follow_grace` without coming back fail.
//!
//! # State table
//!
//! ```text
//!  state        event                         next          effect
//!  -----------  ----------------------------  ------------  ---------------------------------
//!  Down         DialStart (dial due)          Dialing       Dial { generation + 1 }
//!  Down         DialStart (not due)           Down          Refused
//!  Dialing      DialFailed                    Down          due = now + backoff; backoff × 2
//!  Dialing      Dialed                        Subscribing   -
//!  Subscribing  Ready                         Up            backoff reset; Recovered if it was
//!                                                           up before, else FirstUp
//!  Subscribing  Answered                      Subscribing   (a command of the handshake)
//!  Subscribing  TimedOut / Dropped            Down          Lost (due now): a handshake is
//!                                                           whole or the connection is dropped
//!  Up           Answered                      Up            timeouts = 0
//!  Up           TimedOut (≤ retries in a row) Up            timeouts + 1
//!  Up           TimedOut (> retries in a row) Down          Lost (due now; lost since now)
//!  Up           Dropped                       Down          Lost (due now; lost since now)
//!  Down         Tick (lost ≥ follow_grace)    Down          FollowsExpired
//!  any          any other                     unchanged     -
//! ```
//!
//! Every change goes through [`LinkMachine::on`].

use std::time::{Duration, Instant};

/// The connection's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkState {
    /// No connection; a dial is due at `due`.
    Down,
    /// A dial and its handshake are under way.
    Dialing,
    /// Connected; subscribing to the channels and loading the scripts.
    Subscribing,
    /// Connected and ready for operations.
    Up,
}

/// What happened to the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkEvent {
    /// The worker needs the connection and there is none: may it dial?
    DialStart,
    /// The dial or its handshake failed (or timed out).
    DialFailed,
    /// The dial and the handshake succeeded.
    Dialed,
    /// The channels are subscribed and the scripts loaded.
    Ready,
    /// A command on the connection got its answer.
    Answered,
    /// A command got no answer within the command timeout.
    TimedOut,
    /// The connection broke under a command.
    Dropped,
    /// The idle timer of a lost connection.
    Tick,
}

/// What the worker must do besides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkEffect {
    /// Nothing.
    None,
    /// Dial now; pushes of this dial carry `generation` (those of older dials are stale).
    Dial {
        /// The dial's number.
        generation: u64,
    },
    /// No dial is due yet: the store is unreachable for now.
    Refused,
    /// The connection came up for the first time.
    FirstUp,
    /// The connection came back: tell the router bus messages may be lost, read the follows
    /// again.
    Recovered,
    /// The connection is lost: drop it.
    Lost,
    /// The follows waited longer than their grace: fail them.
    FollowsExpired,
}

/// The limits the machine decides by (from `RedisConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkLimits {
    /// Timeouts in a row a connection may take before it counts as lost.
    pub(crate) retries: u32,
    /// The first wait after a failed dial.
    pub(crate) retry_backoff: Duration,
    /// The longest wait between two dials.
    pub(crate) reconnect_backoff_max: Duration,
    /// How long follows wait for a lost connection to come back.
    pub(crate) follow_grace: Duration,
}

/// The connection's life (see the [module docs](self)).
#[derive(Debug, Clone)]
pub(crate) struct LinkMachine {
    limits: LinkLimits,
    state: LinkState,
    /// When a dial is due (in `Down`).
    due: Instant,
    /// The wait after the next failed dial.
    backoff: Duration,
    /// Timeouts in a row on the current connection.
    timeouts: u32,
    /// Since when a connection that was up is lost (the follows' grace).
    lost_since: Option<Instant>,
    /// Whether a connection was ever up.
    ever_up: bool,
    /// The number of the latest dial.
    generation: u64,
}

impl LinkMachine {
    /// No connection yet, a dial due at `now`.
    pub(crate) fn new(limits: LinkLimits, now: Instant) -> Self {
        LinkMachine {
            limits,
            state: LinkState::Down,
            due: now,
            backoff: limits.retry_backoff,
            timeouts: 0,
            lost_since: None,
            ever_up: false,
            generation: 0,
        }
    }

    /// The state.
    pub(crate) fn state(&self) -> LinkState {
        self.state
    }

    /// The number of the latest dial (pushes of another are stale).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// When the worker must wake for the connection's sake: a due dial while down.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        (self.state == LinkState::Down).then_some(self.due)
    }

    /// Whether a dial is due at `now` (down, and its backoff over).
    pub(crate) fn dial_due(&self, now: Instant) -> bool {
        self.state == LinkState::Down && now >= self.due
    }

    /// The one transition function: the module's table, row for row.
    pub(crate) fn on(&mut self, now: Instant, event: LinkEvent) -> LinkEffect {
        use LinkEvent as E;
        use LinkState as S;
        match (self.state, event) {
            (S::Down, E::DialStart) if now >= self.due => {
                self.state = S::Dialing;
                self.generation += 1;
                LinkEffect::Dial {
                    generation: self.generation,
                }
            }
            (S::Down, E::DialStart) => LinkEffect::Refused,
            (S::Dialing, E::DialFailed) => {
                self.state = S::Down;
                self.due = now + self.backoff;
                self.backoff = (self.backoff * 2)
                    .min(self.limits.reconnect_backoff_max)
                    .max(Duration::from_millis(1));
                LinkEffect::None
            }
            (S::Dialing, E::Dialed) => {
                self.state = S::Subscribing;
                self.timeouts = 0;
                LinkEffect::None
            }
            (S::Subscribing, E::Ready) => {
                self.state = S::Up;
                self.backoff = self.limits.retry_backoff;
                self.lost_since = None;
                if std::mem::replace(&mut self.ever_up, true) {
                    LinkEffect::Recovered
                } else {
                    LinkEffect::FirstUp
                }
            }
            (S::Subscribing | S::Up, E::Answered) => {
                self.timeouts = 0;
                LinkEffect::None
            }
            // A handshake that timed out is dropped at once: kept, the connection would serve
            // operations without its subscriptions (the follows never woken again) and
            // without ever coming up (no recovery: the follows never read again).
            (S::Up, E::TimedOut) if self.timeouts < self.limits.retries => {
                self.timeouts += 1;
                LinkEffect::None
            }
            (S::Subscribing | S::Up, E::TimedOut | E::Dropped) => {
                self.state = S::Down;
                self.lost_since.get_or_insert(now);
                self.due = now;
                self.timeouts = 0;
                LinkEffect::Lost
            }
            (S::Down, E::Tick)
                if self.lost_since.is_some_and(|since| {
                    now.saturating_duration_since(since) >= self.limits.follow_grace
                }) =>
            {
                LinkEffect::FollowsExpired
            }
            _ => LinkEffect::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn limits() -> LinkLimits {
        LinkLimits {
            retries: 2,
            retry_backoff: 50 * MS,
            reconnect_backoff_max: 300 * MS,
            follow_grace: 1000 * MS,
        }
    }

    /// Dials until up, at `now`.
    fn up(m: &mut LinkMachine, now: Instant) -> LinkEffect {
        assert!(matches!(
            m.on(now, LinkEvent::DialStart),
            LinkEffect::Dial { .. }
        ));
        assert_eq!(m.on(now, LinkEvent::Dialed), LinkEffect::None);
        m.on(now, LinkEvent::Ready)
    }

    #[test]
    fn a_first_dial_is_due_at_once_and_comes_up() {
        let t0 = Instant::now();
        let mut m = LinkMachine::new(limits(), t0);
        assert!(m.dial_due(t0));
        assert_eq!(m.deadline(), Some(t0));
        assert_eq!(up(&mut m, t0), LinkEffect::FirstUp);
        assert_eq!(m.state(), LinkState::Up);
        assert_eq!(m.deadline(), None);
        assert_eq!(m.generation(), 1);
    }

    #[test]
    fn failed_dials_back_off_doubling_up_to_the_maximum() {
        let t0 = Instant::now();
        let mut m = LinkMachine::new(limits(), t0);
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..5 {
            assert!(matches!(
                m.on(now, LinkEvent::DialStart),
                LinkEffect::Dial { .. }
            ));
            m.on(now, LinkEvent::DialFailed);
            let due = m.deadline().expect("down");
            waits.push(due - now);
            // Before the wait is over, no dial.
            assert_eq!(m.on(due - MS, LinkEvent::DialStart), LinkEffect::Refused);
            assert!(!m.dial_due(due - MS));
            now = due;
        }
        assert_eq!(waits, [50 * MS, 100 * MS, 200 * MS, 300 * MS, 300 * MS]);
        // Up again: the backoff starts over.
        assert_eq!(up(&mut m, now), LinkEffect::FirstUp);
        m.on(now, LinkEvent::Dropped);
        m.on(now, LinkEvent::DialStart);
        m.on(now, LinkEvent::DialFailed);
        assert_eq!(m.deadline(), Some(now + 50 * MS));
        assert_eq!(m.generation(), 7);
    }

    #[test]
    fn timeouts_in_a_row_lose_the_connection_past_the_retries_and_an_answer_resets_them() {
        let t0 = Instant::now();
        let mut m = LinkMachine::new(limits(), t0);
        up(&mut m, t0);
        assert_eq!(m.on(t0, LinkEvent::TimedOut), LinkEffect::None);
        assert_eq!(m.on(t0, LinkEvent::TimedOut), LinkEffect::None);
        assert_eq!(m.on(t0, LinkEvent::Answered), LinkEffect::None);
        assert_eq!(m.on(t0, LinkEvent::TimedOut), LinkEffect::None);
        assert_eq!(m.on(t0, LinkEvent::TimedOut), LinkEffect::None);
        assert_eq!(m.state(), LinkState::Up);
        assert_eq!(m.on(t0, LinkEvent::TimedOut), LinkEffect::Lost);
        assert_eq!(m.state(), LinkState::Down);
        assert!(m.dial_due(t0), "a lost connection is dialed again at once");
    }

    #[test]
    fn a_connection_back_after_a_loss_is_a_recovery_and_follows_wait_their_grace() {
        let t0 = Instant::now();
        let mut m = LinkMachine::new(limits(), t0);
        up(&mut m, t0);
        let lost = t0 + 10 * MS;
        assert_eq!(m.on(lost, LinkEvent::Dropped), LinkEffect::Lost);
        // Redis away: dials fail, the follows wait out their grace, then fail.
        let mut now = lost;
        while now < lost + 1000 * MS {
            assert_eq!(m.on(now, LinkEvent::Tick), LinkEffect::None);
            m.on(now, LinkEvent::DialStart);
            m.on(now, LinkEvent::DialFailed);
            now = m.deadline().expect("down");
        }
        assert_eq!(
            m.on(lost + 1000 * MS, LinkEvent::Tick),
            LinkEffect::FollowsExpired
        );
        // It comes back: a recovery (the bus may have lost messages).
        assert_eq!(up(&mut m, now), LinkEffect::Recovered);
        assert_eq!(m.on(now, LinkEvent::Tick), LinkEffect::None);
    }

    #[test]
    fn a_dial_that_never_came_up_has_no_grace_to_expire() {
        let t0 = Instant::now();
        let mut m = LinkMachine::new(limits(), t0);
        m.on(t0, LinkEvent::DialStart);
        m.on(t0, LinkEvent::DialFailed);
        assert_eq!(m.on(t0 + 10_000 * MS, LinkEvent::Tick), LinkEffect::None);
    }

    #[test]
    fn a_connection_lost_while_subscribing_is_lost() {
        let t0 = Instant::now();
        let mut m = LinkMachine::new(limits(), t0);
        m.on(t0, LinkEvent::DialStart);
        m.on(t0, LinkEvent::Dialed);
        assert_eq!(m.on(t0, LinkEvent::Dropped), LinkEffect::Lost);
        assert_eq!(m.on(t0, LinkEvent::Ready), LinkEffect::None, "stale");
        assert_eq!(m.state(), LinkState::Down);
    }

    #[test]
    fn a_handshake_command_that_times_out_loses_the_connection_at_once() {
        let t0 = Instant::now();
        let mut m = LinkMachine::new(limits(), t0);
        up(&mut m, t0);
        m.on(t0, LinkEvent::Dropped);
        m.on(t0, LinkEvent::DialStart);
        m.on(t0, LinkEvent::Dialed);
        assert_eq!(m.on(t0, LinkEvent::Answered), LinkEffect::None);
        assert_eq!(m.state(), LinkState::Subscribing);
        // The subscription (or a script load) timed out: dropped, dialed again at once.
        assert_eq!(m.on(t0, LinkEvent::TimedOut), LinkEffect::Lost);
        assert_eq!(m.state(), LinkState::Down);
        assert!(m.dial_due(t0));
        assert_eq!(up(&mut m, t0), LinkEffect::Recovered);
    }

    #[test]
    fn events_out_of_their_state_change_nothing() {
        let t0 = Instant::now();
        let mut m = LinkMachine::new(limits(), t0);
        for e in [
            LinkEvent::DialFailed,
            LinkEvent::Dialed,
            LinkEvent::Ready,
            LinkEvent::Answered,
            LinkEvent::TimedOut,
            LinkEvent::Dropped,
        ] {
            assert_eq!(m.on(t0, e), LinkEffect::None, "{e:?} while down");
            assert_eq!(m.state(), LinkState::Down);
        }
        up(&mut m, t0);
        for e in [
            LinkEvent::DialStart,
            LinkEvent::Dialed,
            LinkEvent::DialFailed,
            LinkEvent::Ready,
            LinkEvent::Tick,
        ] {
            assert_eq!(m.on(t0, e), LinkEffect::None, "{e:?} while up");
            assert_eq!(m.state(), LinkState::Up);
        }
    }
}
