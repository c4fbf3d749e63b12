//! Input: time passed. [`Router::handle_timeout`] fires the drain's deadline, then every
//! timer of the set (`timer.rs`) that is due, each to the part that armed it.

use std::time::Instant;

use super::error::{CancelReason, ServerRequestError};
use super::session::{IdleFired, SessionEvent};
use super::stream::{Phase, Sent, StreamEvent};
use super::timer::Timer;
use super::{Router, ServerOutput};

impl Router {
    /// Input: time passed. Fires every timer due at `now`; early calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        if self.drain_expired(now) {
            return;
        }
        while let Some((_, timer)) = self.timers.pop_due(self.now) {
            match timer {
                Timer::SessionIdle(h) => {
                    if self.sessions.idle_fired(h, self.now, &mut self.timers) == IdleFired::Later {
                        continue;
                    }
                    if !self.cluster_idle(h) {
                        self.session_step(h, SessionEvent::IdleTimer { busy: false });
                    }
                }
                Timer::Heartbeat(stream) => {
                    let fx = &mut Router::fx(self.now, &mut self.timers, &mut self.out);
                    if self.streams.heartbeat_due(stream, &self.config, fx) == Sent::CutSlowReader {
                        self.cut_slow_reader(stream);
                    }
                }
                Timer::Stall(stream) => {
                    if self.streams.stall_due(stream) {
                        self.cut_slow_reader(stream);
                    }
                }
                Timer::RequestDeadline(id) => {
                    if let Some(o) = self.outbound.get_mut(&id) {
                        o.deadline = None;
                    }
                    if self.outbound.contains_key(&id) {
                        self.abandon_outbound(id, "timed out");
                        self.out.push_back(ServerOutput::ServerRequestFailed {
                            request: id,
                            error: ServerRequestError::Timeout,
                        });
                    }
                }
                Timer::Retention(lsid) => {
                    if let Some(ls) = self.streams.stream_mut(&lsid) {
                        ls.retention = None;
                        if ls.step(StreamEvent::RetentionOver) == Some(Phase::Done) {
                            self.drop_stream(lsid);
                        }
                    }
                }
                Timer::StoreDeadlines => self.store_deadlines(),
                Timer::ResumeGrace(lsid) => {
                    if let Some(ls) = self.streams.stream_mut(&lsid) {
                        ls.grace = None;
                        if ls.step(StreamEvent::GraceOver) == Some(Phase::Done) {
                            self.cancel_stream_handlers(lsid, CancelReason::Disconnected);
                            self.drop_stream(lsid);
                        }
                    }
                }
            }
        }
    }
}
