//! The two signals of the run loops: [`Latch`] (set once, awaited by many: "draining",
//! "stopped") and [`Wakeup`] (set by the service often, taken by the one loop).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use event_listener::Event;

/// A flag set once and awaited by any number of tasks. Cheap to clone; clones share it.
/// A waiter that goes away leaves nothing behind (no waker list grows with churn).
#[derive(Clone, Default)]
pub struct Latch(Arc<LatchInner>);

#[derive(Default)]
struct LatchInner {
    set: AtomicBool,
    event: Event,
}

impl std::fmt::Debug for Latch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Latch").field(&self.is_set()).finish()
    }
}

impl Latch {
    /// A latch not yet set.
    pub fn new() -> Latch {
        Latch::default()
    }

    /// Sets it and wakes every waiter (a second call changes nothing).
    pub fn set(&self) {
        self.0.set.store(true, Ordering::SeqCst);
        self.0.event.notify(usize::MAX);
    }

    /// Whether it is set.
    pub fn is_set(&self) -> bool {
        self.0.set.load(Ordering::SeqCst)
    }

    /// Resolves once it is set.
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let latch = self.clone();
        async move {
            while !latch.is_set() {
                let listener = latch.0.event.listen();
                if latch.is_set() {
                    break;
                }
                listener.await;
            }
        }
    }

    /// Sets the latch when the returned guard drops (a task that ends or is cancelled).
    pub(crate) fn set_on_drop(&self) -> SetOnDrop {
        SetOnDrop(self.clone())
    }
}

/// See [`Latch::set_on_drop`].
pub(crate) struct SetOnDrop(Latch);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.set();
    }
}

/// A wake-up for one waiting loop: [`wake`](Wakeup::wake) from anywhere, any number of
/// times; the loop's [`poll_take`](Wakeup::poll_take) sees at least one.
#[derive(Default)]
pub(crate) struct Wakeup {
    pending: AtomicBool,
    waker: AtomicWaker,
}

impl Wakeup {
    pub(crate) fn wake(&self) {
        self.pending.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Ready (and cleared) when woken since the last take.
    pub(crate) fn poll_take(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.pending.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        self.waker.register(cx.waker());
        if self.pending.swap(false, Ordering::AcqRel) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// The binding's wake callback.
    pub(crate) fn callback(self: &Arc<Self>) -> mcp_service::bind::Wake {
        let this = self.clone();
        Arc::new(move || this.wake())
    }
}
