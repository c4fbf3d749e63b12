//! Binding the service to the sans-IO transport: [`ServerBinding`] (a [`Server`] behind a
//! [`Router`](mcp_proto::server::Router)) and [`ClientBinding`] (a [`Client`] on a
//! [`ClientSession`](mcp_proto::client::ClientSession)).
//!
//! An adapter's driver loop stays what the state machines ask for — drain outputs, sleep
//! until the deadline or the next input, feed what fired — with two additions:
//!
//! 1. pass every output to the binding's `handle_output`: transport outputs (HTTP heads,
//!    bodies, ends, intents, events) come back as [`Routed::Transport`] for the adapter to
//!    perform; application outputs are consumed, and the ones that need work come back as
//!    [`Routed::Spawn`] futures (a handler, an answer to a server request) to spawn;
//! 2. call the binding's `apply` before draining: it applies, in order, what the service
//!    queued meanwhile (responses, notifications, server→client requests, client messages
//!    and cancellations). The `wake` callback given at construction is called whenever
//!    something is queued, so the loop knows to run.
//!
//! The machines stay owned by the driver (no lock around them, no `Send` needed); the
//! service reaches them only through the binding's queue, which also keeps the order the
//! [`Peer`](super::Peer) contract promises: what a handler sends precedes its response.

mod client;
mod server;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

pub use client::ClientBinding;

pub use server::{ServerBinding, Sleep, Spawn};

use super::cancel::lock;
use super::server::BoxFuture;
#[cfg(doc)]
use super::{Server, client::Client};

/// What to do with an output after the binding saw it.
#[must_use]
pub enum Routed<T> {
    /// A transport output: perform it (HTTP, SSE, events).
    Transport(T),
    /// Work for the runtime: spawn this future.
    Spawn(BoxFuture<'static, ()>),
    /// Consumed; nothing to do.
    Done,
}

impl<T: std::fmt::Debug> std::fmt::Debug for Routed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Routed::Transport(t) => f.debug_tuple("Transport").field(t).finish(),
            Routed::Spawn(_) => f.write_str("Spawn(..)"),
            Routed::Done => f.write_str("Done"),
        }
    }
}

/// The wake-up callback: called whenever the service queues work for the driver.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// A FIFO of commands from the service to the driver, with its wake-up callback.
pub(crate) struct Queue<C> {
    commands: Mutex<VecDeque<C>>,
    /// The buffer a [`drain`](Self::drain) returned, emptied and given back
    /// ([`recycle`](Self::recycle)): the next drain leaves it in the queue, so that a busy
    /// binding does not grow a buffer from nothing for every turn (under load that regrowth
    /// was a tenth of a server's allocations).
    spare: Mutex<Spare<C>>,
    wake: Wake,
}

/// The recycled buffer and how the turns went since the last busy one.
struct Spare<C> {
    buffer: VecDeque<C>,
    /// Quiet turns (fewer than [`BUSY`] commands, at least one) since the last busy one.
    quiet: usize,
}

/// The most commands a recycled buffer keeps room for: one with room for more than twice
/// as many (a burst) is shrunk to it, so a burst is not pinned.
const RETAINED: usize = 2048;

/// The fewest commands of a busy turn.
const BUSY: usize = 16;

/// Quiet turns in a row after which the buffers are dropped: a binding whose load ended
/// holds none. An empty turn (a driver loop's pass with nothing queued) does not count.
const QUIET_TURNS: usize = 16;

impl<C> Queue<C> {
    pub(crate) fn new(wake: Wake) -> Self {
        Queue {
            commands: Mutex::new(VecDeque::new()),
            spare: Mutex::new(Spare {
                buffer: VecDeque::new(),
                quiet: 0,
            }),
            wake,
        }
    }

    pub(crate) fn push(&self, command: C) {
        lock(&self.commands).push_back(command);
        (self.wake)();
    }

    /// Everything queued, in order. The queue is taken whole, no copy; the spare buffer (if
    /// any was given back) takes its place.
    pub(crate) fn drain(&self) -> VecDeque<C> {
        let spare = std::mem::take(&mut lock(&self.spare).buffer);
        std::mem::replace(&mut *lock(&self.commands), spare)
    }

    /// Gives back the buffer a [`drain`](Self::drain) returned with `carried` commands,
    /// once they are taken. The larger of it and the spare is kept, emptied, for the next
    /// drain: under load a driver's passes alternate between busy turns and quiet or empty
    /// ones (woken by I/O, not by the service), and a buffer dropped at a quiet turn is
    /// grown again from nothing at the next busy one (measured: dropped at every quiet turn,
    /// the regrowth was 3 % of a server's CPU under load on Redis). A kept buffer is shrunk
    /// only past twice [`RETAINED`]; both buffers are dropped after [`QUIET_TURNS`] quiet
    /// turns in a row.
    pub(crate) fn recycle(&self, mut used: VecDeque<C>, carried: usize) {
        let mut spare = lock(&self.spare);
        if carried >= BUSY {
            spare.quiet = 0;
        } else if carried > 0 {
            spare.quiet += 1;
            if spare.quiet >= QUIET_TURNS {
                spare.buffer = VecDeque::new();
                return;
            }
        }
        if used.capacity() <= spare.buffer.capacity() {
            return;
        }
        used.clear();
        if used.capacity() > 2 * RETAINED {
            used.shrink_to(RETAINED);
        }
        spare.buffer = used;
    }
}

/// The tool, resource or prompt a request is about, for logs: `params.name` (`tools/call`,
/// `prompts/get`) or `params.uri` (`resources/read`); `None` when its params name none.
pub fn request_subject(params: Option<&serde_json::value::RawValue>) -> Option<String> {
    server::Subject::of_params(params)
}

#[cfg(test)]
mod tests {
    use super::{BUSY, QUIET_TURNS, Queue, RETAINED};
    use std::sync::Arc;

    /// Pushes `n` commands and drains them: the buffer and how many it carried.
    fn turn(q: &Queue<usize>, n: usize) -> (std::collections::VecDeque<usize>, usize) {
        for i in 0..n {
            q.push(i);
        }
        let got = q.drain();
        assert_eq!(
            got.iter().copied().collect::<Vec<_>>(),
            (0..n).collect::<Vec<_>>()
        );
        let carried = got.len();
        (got, carried)
    }

    #[test]
    fn drained_buffers_given_back_take_turns_and_a_burst_is_not_pinned() {
        let q = Queue::new(Arc::new(|| {}));
        // Busy turns: the buffer given back takes the queue's place at the next drain; from
        // then on the two buffers take turns, and neither grows from nothing again.
        let (first, n) = turn(&q, 100);
        q.recycle(first, n);
        let (second, n) = turn(&q, BUSY);
        q.recycle(second, n);
        let (third, n) = turn(&q, BUSY);
        assert!(third.capacity() >= 100, "{}", third.capacity());
        q.recycle(third, n);
        // A burst far beyond the usual turn is shrunk when given back.
        let (burst, n) = turn(&q, 10 * RETAINED);
        q.recycle(burst, n);
        let (_, _) = turn(&q, BUSY);
        let (after, _) = turn(&q, 1);
        assert!(after.capacity() < 2 * RETAINED, "{}", after.capacity());
    }

    #[test]
    fn turns_of_a_steady_load_keep_their_room() {
        let q = Queue::new(Arc::new(|| {}));
        // Turns of a thousand commands: a buffer given back keeps its room for the next
        // such turn (not shrunk, so not grown again).
        let mut rooms = Vec::new();
        for _ in 0..6 {
            let (used, n) = turn(&q, 1000);
            q.recycle(used, n);
            rooms.push(super::lock(&q.spare).buffer.capacity());
        }
        assert!(rooms.iter().all(|&c| c >= 1000), "{rooms:?}");
    }

    #[test]
    fn an_idle_queue_holds_no_buffer() {
        let q = Queue::new(Arc::new(|| {}));
        // Once busy, then quiet: within one more quiet turn than QUIET_TURNS, neither
        // buffer is kept.
        let (busy, n) = turn(&q, 100);
        q.recycle(busy, n);
        for _ in 0..=QUIET_TURNS {
            let (quiet, n) = turn(&q, 1);
            q.recycle(quiet, n);
        }
        assert_eq!(super::lock(&q.spare).buffer.capacity(), 0);
        assert_eq!(super::lock(&q.commands).capacity(), 0);
    }

    #[test]
    fn quiet_and_empty_turns_between_busy_ones_keep_the_room() {
        let q = Queue::new(Arc::new(|| {}));
        // A driver under load: busy turns, with passes between them that carry nothing or
        // a few commands. The busy turns' room survives them (dropped at such a pass, it was
        // grown from nothing at every busy turn).
        for _ in 0..4 {
            let (busy, n) = turn(&q, 1000);
            q.recycle(busy, n);
            for carried in [0, 0, 3, 0, 1, 0, 0] {
                let (pass, n) = turn(&q, carried);
                q.recycle(pass, n);
            }
            let room = super::lock(&q.spare)
                .buffer
                .capacity()
                .max(super::lock(&q.commands).capacity());
            assert!(room >= 1000, "{room}");
        }
    }
}
