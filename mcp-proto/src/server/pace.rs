//! Write pacing: each streaming connection's body is handed to the adapter no faster than the
//! client takes it.
//!
//! # Theory of operation
//!
//! The router emits a connection's body chunks ([`ServerOutput::ResponseBody`]) while the
//! bytes it emitted and the adapter has not yet reported taken ([`Router::handle_written`])
//! stay within [`ServerLimits::send_window`]. Beyond the window, chunks wait in the
//! connection's **backlog**, in order, and leave it as the client takes bytes. A resume that
//! replays a thousand stored events is therefore written as fast as the client reads it, an
//! adapter never holds more than one window per connection, and a client is never judged by
//! how fast the server *produced* its events, only by whether it *takes* them.
//!
//! The **slow-reader rule** fires on a connection that has data waiting and whose client took
//! no byte for [`ServerLimits::slow_reader_timeout`], or whose backlog of *live* bytes (not
//! counting replayed events, which the event store holds anyway) grows past
//! [`ServerLimits::max_backlog_bytes`]. Such a connection is cut: the adapter aborts it
//! ([`ServerOutput::ResponseAbort`], never a clean end that the client could mistake for a
//! complete stream) and the router treats it as a disconnect, so a resumable stream detaches
//! and its later events stay in the event store for a `Last-Event-ID` resume. A fresh
//! response is never cut for its size: its client has the whole timeout to start reading.
//!
//! Ending a connection whose backlog is not empty does not drop the backlog: the exchange
//! leaves its logical stream and *drains* (its end is emitted once the backlog is taken).
//!
//! ```text
//!  state     event                          next      effect
//!  --------  -----------------------------  --------  ----------------------------------------
//!  Flowing   chunk, window has room         Flowing   chunk emitted
//!  Flowing   chunk, window full             Blocked   chunk backlogged, stall timer armed
//!  Blocked   chunk                          Blocked   chunk backlogged
//!  Blocked   chunk, live backlog > budget   Cut       abort + disconnect
//!  Blocked   bytes taken, backlog left      Blocked   backlog emitted up to the window,
//!                                                     stall timer re-armed (progress)
//!  Blocked   bytes taken, backlog empty     Flowing   stall timer cleared
//!  Blocked   stall timer                    Cut       abort + disconnect
//!  any       end requested, backlog empty   —         end emitted, exchange forgotten
//!  Blocked   end requested                  Draining  exchange leaves its logical stream
//!  Draining  bytes taken, backlog empty     —         end emitted, exchange forgotten
//! ```
//!
//! [`ServerOutput::ResponseBody`]: super::ServerOutput::ResponseBody
//! [`ServerOutput::ResponseAbort`]: super::ServerOutput::ResponseAbort
//! [`Router::handle_written`]: super::Router::handle_written
//! [`ServerLimits::send_window`]: super::ServerLimits::send_window
//! [`ServerLimits::slow_reader_timeout`]: super::ServerLimits::slow_reader_timeout
//! [`ServerLimits::max_backlog_bytes`]: super::ServerLimits::max_backlog_bytes

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;

/// The pacing state of one connection.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// Bytes emitted and not yet reported taken.
    unacked: usize,
    /// Chunks waiting for room in the window; `true` marks a live (not replayed) chunk.
    backlog: VecDeque<(Bytes, bool)>,
    /// Bytes of live chunks in the backlog.
    live_bytes: usize,
    /// The stall timer's deadline (its slot in the router's timer queue).
    pub(crate) stall: Option<Instant>,
}

/// What [`Pace::push`] decided.
#[derive(Debug)]
pub(crate) enum Push {
    /// Emit the chunk now.
    Emit(Bytes),
    /// Backlogged; `newly_blocked` when the backlog was empty before (arm the stall timer).
    Held { newly_blocked: bool },
    /// The live backlog went over its budget: cut the connection.
    OverBudget,
}

impl Pace {
    /// A chunk for the connection: emitted while the window has room and nothing waits
    /// ahead of it, backlogged otherwise.
    pub(crate) fn push(
        &mut self,
        chunk: Bytes,
        live: bool,
        window: usize,
        max_live: usize,
    ) -> Push {
        if self.backlog.is_empty() && self.unacked < window {
            self.unacked += chunk.len();
            return Push::Emit(chunk);
        }
        let newly_blocked = self.backlog.is_empty();
        if live {
            self.live_bytes += chunk.len();
        }
        self.backlog.push_back((chunk, live));
        if self.live_bytes > max_live {
            return Push::OverBudget;
        }
        Push::Held { newly_blocked }
    }

    /// The client took `n` bytes; returns the chunks that now fit the window, in order.
    pub(crate) fn taken(&mut self, n: usize, window: usize) -> Vec<Bytes> {
        self.unacked = self.unacked.saturating_sub(n);
        let mut out = Vec::new();
        while self.unacked < window {
            let Some((chunk, live)) = self.backlog.pop_front() else {
                break;
            };
            if live {
                self.live_bytes -= chunk.len();
            }
            self.unacked += chunk.len();
            out.push(chunk);
        }
        out
    }

    /// Data is waiting for room in the window.
    pub(crate) fn is_blocked(&self) -> bool {
        !self.backlog.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(n: usize) -> Bytes {
        Bytes::from(vec![b'x'; n])
    }

    #[test]
    fn emits_within_the_window_then_backlogs_in_order() {
        let mut p = Pace::default();
        assert!(matches!(p.push(chunk(60), true, 100, 1000), Push::Emit(_)));
        assert!(matches!(p.push(chunk(60), true, 100, 1000), Push::Emit(_)));
        // 120 unacked >= 100: held, and the first hold blocks.
        assert!(matches!(
            p.push(chunk(1), true, 100, 1000),
            Push::Held {
                newly_blocked: true
            }
        ));
        assert!(matches!(
            p.push(chunk(2), false, 100, 1000),
            Push::Held {
                newly_blocked: false
            }
        ));
        assert!(p.is_blocked());
        // Taking 30 leaves 90 unacked: one chunk fits (then 91), the next too (93 < 100).
        let out = p.taken(30, 100);
        assert_eq!(out.iter().map(Bytes::len).collect::<Vec<_>>(), [1, 2]);
        assert!(!p.is_blocked());
    }

    #[test]
    fn only_live_bytes_count_against_the_budget() {
        let mut p = Pace::default();
        assert!(matches!(p.push(chunk(10), false, 10, 50), Push::Emit(_)));
        for _ in 0..20 {
            // Replayed chunks: never over budget.
            assert!(matches!(
                p.push(chunk(10), false, 10, 50),
                Push::Held { .. }
            ));
        }
        for _ in 0..5 {
            assert!(matches!(p.push(chunk(10), true, 10, 50), Push::Held { .. }));
        }
        assert!(matches!(p.push(chunk(10), true, 10, 50), Push::OverBudget));
    }

    #[test]
    fn held_chunks_leave_in_order() {
        let mut p = Pace::default();
        let _ = p.push(chunk(10), true, 10, 100);
        let _ = p.push(Bytes::from_static(b"a"), true, 10, 100);
        let _ = p.push(Bytes::from_static(b"b"), true, 10, 100);
        assert!(p.taken(0, 10).is_empty(), "no room yet");
        assert_eq!(
            p.taken(10, 10),
            [Bytes::from_static(b"a"), Bytes::from_static(b"b")]
        );
        assert!(!p.is_blocked());
    }
}
