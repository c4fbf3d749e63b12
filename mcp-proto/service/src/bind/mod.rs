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
    /// The buffer of the last busy [`drain`](Self::drain), emptied and given back
    /// ([`recycle`](Self::recycle)): the next drain leaves it in the queue, so that a busy
    /// binding does not grow a buffer from nothing for every turn (under load that regrowth
    /// was a tenth of a server's allocations). A quiet turn's buffer is dropped, so that an
    /// idle binding holds none.
    spare: Mutex<VecDeque<C>>,
    wake: Wake,
}

/// The most commands a recycled buffer keeps room for (a burst beyond it is not pinned).
const RETAINED: usize = 2048;

/// The fewest commands of a turn whose buffer is kept for the next one.
const BUSY: usize = 16;

impl<C> Queue<C> {
    pub(crate) fn new(wake: Wake) -> Self {
        Queue {
            commands: Mutex::new(VecDeque::new()),
            spare: Mutex::new(VecDeque::new()),
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
        let spare = std::mem::take(&mut *lock(&self.spare));
        std::mem::replace(&mut *lock(&self.commands), spare)
    }

    /// Gives back the buffer a [`drain`](Self::drain) returned with `carried` commands,
    /// once they are taken: kept (emptied) when the turn was busy ([`BUSY`]), else dropped.
    /// A kept buffer keeps room for a turn like this one, up to [`RETAINED`]: it is shrunk
    /// only when it has more than twice that (a burst), so that turns of a steady load,
    /// however many commands they carry, neither shrink it nor grow it again (shrunk to a
    /// fixed 256 at every turn of a thousand commands, it was reallocated twice a turn).
    pub(crate) fn recycle(&self, mut used: VecDeque<C>, carried: usize) {
        if carried < BUSY {
            return;
        }
        used.clear();
        let room = carried.min(RETAINED);
        if used.capacity() > 2 * room {
            used.shrink_to(room);
        }
        *lock(&self.spare) = used;
    }
}

/// The tool, resource or prompt a request is about, for logs: `params.name` (`tools/call`,
/// `prompts/get`) or `params.uri` (`resources/read`); `None` when its params name none.
pub fn request_subject(params: Option<&serde_json::value::RawValue>) -> Option<String> {
    server::Subject::of_params(params)
}

#[cfg(test)]
mod tests {
    use super::{BUSY, Queue, RETAINED};
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
            rooms.push(super::lock(&q.spare).capacity());
        }
        assert!(rooms.iter().all(|&c| c >= 1000), "{rooms:?}");
    }

    #[test]
    fn an_idle_queue_holds_no_buffer() {
        let q = Queue::new(Arc::new(|| {}));
        // Once busy, then quiet: within two quiet turns neither buffer is kept.
        let (busy, n) = turn(&q, 100);
        q.recycle(busy, n);
        for _ in 0..2 {
            let (quiet, n) = turn(&q, 1);
            q.recycle(quiet, n);
        }
        assert_eq!(super::lock(&q.spare).capacity(), 0);
        assert_eq!(super::lock(&q.commands).capacity(), 0);
    }
}
