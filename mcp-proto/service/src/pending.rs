//! [`PendingRequests`] and [`ResponseFuture`]: matching answers to requests sent to the peer.
//!
//! Whoever sends a request (a transport driver for the server's requests to the client, the
//! [`Client`](super::client::Client) for its own) registers it under a key and hands out the
//! future; the answer, when it arrives, completes it. A future dropped by its owner shows up in
//! [`PendingRequests::abandoned`], so the sender can tell the peer to stop.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};

use futures_channel::oneshot;

use super::cancel::lock;
use super::error::PeerError;
use mcp_proto::jsonrpc::Response;

/// The answer to a request sent to the peer: its response, or why none will come.
pub type PeerResult = Result<Response, PeerError>;

/// Requests sent to the peer and not yet answered, by key (an id, a transport handle).
#[derive(Debug)]
pub struct PendingRequests<K> {
    map: Mutex<HashMap<K, oneshot::Sender<PeerResult>>>,
}

impl<K> Default for PendingRequests<K> {
    fn default() -> Self {
        PendingRequests {
            map: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone> PendingRequests<K> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a request under `key` and returns the future of its answer. A request already
    /// registered under the same key is failed with [`PeerError::Cancelled`].
    pub fn register(&self, key: K) -> ResponseFuture {
        let (tx, rx) = oneshot::channel();
        if let Some(old) = lock(&self.map).insert(key, tx) {
            // The receiver may be gone; then nobody is waiting and there is nothing to do.
            let _ = old.send(Err(PeerError::Cancelled));
        }
        ResponseFuture {
            state: State::Waiting(rx),
        }
    }

    /// Completes the request registered under `key`. Returns `false` when there is none (an
    /// unknown or late answer) or when its future was dropped.
    pub fn complete(&self, key: &K, result: PeerResult) -> bool {
        // The lock is released before the send wakes the caller: woken while it is held, the
        // caller could preempt this thread and block on the same lock at once.
        let tx = lock(&self.map).remove(key);
        tx.is_some_and(|tx| tx.send(result).is_ok())
    }

    /// Forgets the request under `key` without answering it (its future then resolves to
    /// [`PeerError::Closed`]). Returns whether there was one.
    pub fn remove(&self, key: &K) -> bool {
        lock(&self.map).remove(key).is_some()
    }

    /// Whether a request is registered under `key`.
    pub fn contains(&self, key: &K) -> bool {
        lock(&self.map).contains_key(key)
    }

    /// Fails every pending request with `error` (the connection closed, say).
    pub fn fail_all(&self, error: PeerError) {
        let drained: Vec<_> = lock(&self.map).drain().collect();
        for (_, tx) in drained {
            let _ = tx.send(Err(error.clone()));
        }
    }

    /// Removes and returns the keys whose futures were dropped without an answer: the sender
    /// may tell the peer to stop working on them.
    pub fn abandoned(&self) -> Vec<K> {
        let mut map = lock(&self.map);
        let gone: Vec<K> = map
            .iter()
            .filter(|(_, tx)| tx.is_canceled())
            .map(|(k, _)| k.clone())
            .collect();
        for key in &gone {
            map.remove(key);
        }
        gone
    }

    /// How many requests are waiting for an answer.
    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    /// Whether no request is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Debug)]
enum State {
    Waiting(oneshot::Receiver<PeerResult>),
    Ready(Option<PeerResult>),
}

/// The future answer to a request sent to the peer.
///
/// Resolves to [`PeerError::Closed`] when the table it came from is dropped without an answer.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct ResponseFuture {
    state: State,
}

impl ResponseFuture {
    /// A future that resolves at once with `result` (for a transport that can tell right away,
    /// e.g. that it cannot carry requests).
    pub fn ready(result: PeerResult) -> Self {
        ResponseFuture {
            state: State::Ready(Some(result)),
        }
    }
}

impl Future for ResponseFuture {
    type Output = PeerResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<PeerResult> {
        match &mut self.state {
            State::Waiting(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.unwrap_or(Err(PeerError::Closed))),
            State::Ready(result) => Poll::Ready(result.take().unwrap_or(Err(PeerError::Closed))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_proto::jsonrpc::{ErrorObject, RequestId};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    fn poll(f: &mut ResponseFuture) -> Poll<PeerResult> {
        let waker = Waker::from(Arc::new(Noop));
        Pin::new(f).poll(&mut Context::from_waker(&waker))
    }

    /// A waker that looks at the table when woken: whether its lock was free then.
    struct Probe {
        table: Arc<PendingRequests<u64>>,
        lock_free_at_wake: Mutex<Option<bool>>,
    }
    impl Wake for Probe {
        fn wake(self: Arc<Self>) {
            let free = self.table.map.try_lock().is_ok();
            *lock(&self.lock_free_at_wake) = Some(free);
        }
    }

    #[test]
    fn the_caller_is_woken_after_the_lock_is_released() {
        let table = Arc::new(PendingRequests::<u64>::new());
        let mut f = table.register(7);
        let probe = Arc::new(Probe {
            table: table.clone(),
            lock_free_at_wake: Mutex::new(None),
        });
        let waker = Waker::from(probe.clone());
        assert!(
            Pin::new(&mut f)
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        assert!(table.complete(&7, Err(PeerError::Timeout)));
        assert_eq!(
            *lock(&probe.lock_free_at_wake),
            Some(true),
            "woken under the lock"
        );
        assert_eq!(poll(&mut f), Poll::Ready(Err(PeerError::Timeout)));
    }

    #[test]
    fn complete_fail_and_abandon() {
        let table = PendingRequests::<u64>::new();
        let mut a = table.register(1);
        let b = table.register(2);
        let mut c = table.register(3);
        assert!(poll(&mut a).is_pending());
        let response = Response::error(Some(RequestId::Number(1)), ErrorObject::new(-1, "x"));
        assert!(table.complete(&1, Ok(response.clone())));
        assert_eq!(poll(&mut a), Poll::Ready(Ok(response)));
        assert!(
            !table.complete(&1, Err(PeerError::Timeout)),
            "answered once"
        );
        drop(b);
        assert_eq!(table.abandoned(), vec![2]);
        table.fail_all(PeerError::Closed);
        assert_eq!(poll(&mut c), Poll::Ready(Err(PeerError::Closed)));
        assert!(table.is_empty());
        let mut r = ResponseFuture::ready(Err(PeerError::Timeout));
        assert_eq!(poll(&mut r), Poll::Ready(Err(PeerError::Timeout)));
    }
}
