//! [`CancellationToken`]: a runtime-agnostic, cloneable "this request was cancelled" signal.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// Locks a mutex, ignoring poisoning: every critical section in this module leaves its data
/// consistent, so a panic elsewhere does not make it unusable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Debug, Default)]
struct State {
    cancelled: bool,
    wakers: Vec<Waker>,
}

/// A cancellation signal shared by clones: [`cancel`](Self::cancel) once, and every
/// [`cancelled`](Self::cancelled) future completes and [`is_cancelled`](Self::is_cancelled)
/// turns `true`.
///
/// No runtime involved: the futures register their waker and are woken by `cancel`.
#[derive(Debug, Clone, Default)]
pub struct CancellationToken {
    state: Arc<Mutex<State>>,
}

impl CancellationToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels: wakes every waiting [`cancelled`](Self::cancelled) future. Idempotent.
    pub fn cancel(&self) {
        let wakers = {
            let mut state = lock(&self.state);
            state.cancelled = true;
            std::mem::take(&mut state.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        lock(&self.state).cancelled
    }

    /// Whether both are clones of the same token.
    pub(crate) fn ptr_eq(&self, other: &CancellationToken) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    /// A future that completes when the token is cancelled (at once if it already is).
    pub fn cancelled(&self) -> WaitForCancellation {
        WaitForCancellation {
            token: self.clone(),
        }
    }
}

/// The future of [`CancellationToken::cancelled`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct WaitForCancellation {
    token: CancellationToken,
}

impl Future for WaitForCancellation {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.token.state);
        if state.cancelled {
            return Poll::Ready(());
        }
        if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            state.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Runs `future` until it completes (`Some`) or `token` is cancelled (`None`, and `future`
/// is dropped at once).
pub(crate) fn until_cancelled<F: Future>(token: CancellationToken, future: F) -> UntilCancelled<F> {
    UntilCancelled {
        wait: token.cancelled(),
        future: Box::pin(future),
    }
}

/// The future of [`until_cancelled`].
pub(crate) struct UntilCancelled<F> {
    wait: WaitForCancellation,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for UntilCancelled<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if Pin::new(&mut self.wait).poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        self.future.as_mut().poll(cx).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    struct Flag(Mutex<bool>);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            *lock(&self.0) = true;
        }
    }

    #[test]
    fn cancel_wakes_and_completes_every_waiter() {
        let token = CancellationToken::new();
        let flag = Arc::new(Flag(Mutex::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut a = token.cancelled();
        let mut b = token.clone().cancelled();
        assert!(Pin::new(&mut a).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut b).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut a).poll(&mut cx).is_pending());
        assert_eq!(lock(&token.state).wakers.len(), 1, "one waker per task");
        token.cancel();
        assert!(*lock(&flag.0));
        assert!(token.is_cancelled());
        assert!(Pin::new(&mut a).poll(&mut cx).is_ready());
        assert!(Pin::new(&mut b).poll(&mut cx).is_ready());
    }

    #[test]
    fn until_cancelled_drops_the_inner_future() {
        let token = CancellationToken::new();
        let waker = Waker::from(Arc::new(Flag(Mutex::new(false))));
        let mut cx = Context::from_waker(&waker);
        let mut fut = until_cancelled(token.clone(), std::future::pending::<()>());
        assert!(Pin::new(&mut fut).poll(&mut cx).is_pending());
        token.cancel();
        assert_eq!(Pin::new(&mut fut).poll(&mut cx), Poll::Ready(None));
        let mut done = until_cancelled(CancellationToken::new(), std::future::ready(5));
        assert_eq!(Pin::new(&mut done).poll(&mut cx), Poll::Ready(Some(5)));
    }
}
