//! A tiny deterministic executor on a virtual clock, for end-to-end tests without a runtime.
//!
//! Tasks run one at a time on the calling thread. When no task can make progress, the clock
//! jumps to the earliest timer, so a test that "sleeps" 50 ms takes no real time and always
//! interleaves the same way. When nothing can make progress and no timer is set, the run is
//! stuck: [`Executor::block_on`] panics saying so, instead of hanging the test.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

type Task = Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Inner {
    ready: Mutex<VecDeque<Arc<TaskCell>>>,
    timers: Mutex<BTreeMap<(Duration, u64), Waker>>,
    now: Mutex<Duration>,
    next_timer: AtomicU64,
    start: Instant,
}

struct TaskCell {
    future: Task,
    exec: Weak<Inner>,
}

impl Wake for TaskCell {
    fn wake(self: Arc<Self>) {
        if let Some(exec) = self.exec.upgrade() {
            lock(&exec.ready).push_back(self.clone());
        }
    }
}

/// The executor; cheap to clone (clones share it), `Send + Sync` so peers can hold it.
#[derive(Clone)]
pub struct Executor {
    inner: Arc<Inner>,
}

impl Default for Executor {
    fn default() -> Self {
        Self::new()
    }
}

impl Executor {
    /// An executor with the clock at zero.
    pub fn new() -> Self {
        Executor {
            inner: Arc::new(Inner {
                ready: Mutex::new(VecDeque::new()),
                timers: Mutex::new(BTreeMap::new()),
                now: Mutex::new(Duration::ZERO),
                next_timer: AtomicU64::new(0),
                start: Instant::now(),
            }),
        }
    }

    /// Virtual time since the executor was made.
    pub fn elapsed(&self) -> Duration {
        *lock(&self.inner.now)
    }

    /// The virtual clock as an [`Instant`] (a fixed real start plus virtual time), for the
    /// sans-IO state machines.
    pub fn now(&self) -> Instant {
        self.inner.start + self.elapsed()
    }

    /// Runs `future` as a task.
    pub fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        let cell = Arc::new(TaskCell {
            future: Mutex::new(Some(Box::pin(future))),
            exec: Arc::downgrade(&self.inner),
        });
        lock(&self.inner.ready).push_back(cell);
    }

    /// A future that completes `duration` later on the virtual clock.
    pub fn sleep(&self, duration: Duration) -> Sleep {
        Sleep {
            exec: self.clone(),
            deadline: self.elapsed() + duration,
        }
    }

    /// Runs `future` (and every spawned task) until `future` completes.
    ///
    /// # Panics
    ///
    /// When nothing can run and no timer is set before `future` completes (a hang).
    pub fn block_on<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> T {
        let slot = Arc::new(Mutex::new(None));
        let out = slot.clone();
        self.spawn(async move {
            let value = future.await;
            *lock(&out) = Some(value);
        });
        loop {
            self.run_ready();
            if let Some(value) = lock(&slot).take() {
                return value;
            }
            if !self.advance() {
                panic!(
                    "stuck at {:?}: the main future waits, but no task is ready and no timer is set",
                    self.elapsed()
                );
            }
        }
    }

    /// Runs every ready task until none is left (without advancing the clock).
    pub fn run_ready(&self) {
        loop {
            let next = lock(&self.inner.ready).pop_front();
            let Some(cell) = next else { return };
            let waker = Waker::from(cell.clone());
            let mut cx = Context::from_waker(&waker);
            let mut slot = lock(&cell.future);
            if let Some(future) = slot.as_mut()
                && future.as_mut().poll(&mut cx).is_ready()
            {
                *slot = None;
            }
        }
    }

    /// Jumps the clock to the earliest timer and wakes every timer due; `false` when there is
    /// none.
    pub fn advance(&self) -> bool {
        let due = {
            let mut timers = lock(&self.inner.timers);
            let Some((&(at, _), _)) = timers.iter().next() else {
                return false;
            };
            let mut now = lock(&self.inner.now);
            if at > *now {
                *now = at;
            }
            let later = timers.split_off(&(*now + Duration::from_nanos(1), 0));
            std::mem::replace(&mut *timers, later)
        };
        for (_, waker) in due {
            waker.wake();
        }
        true
    }

    /// When the earliest timer is due, if any.
    pub fn next_timer(&self) -> Option<Duration> {
        lock(&self.inner.timers).keys().next().map(|(at, _)| *at)
    }

    /// Moves the clock to `at` (never backwards) and wakes every timer due by then.
    pub fn advance_to(&self, at: Duration) {
        let due = {
            let mut timers = lock(&self.inner.timers);
            let mut now = lock(&self.inner.now);
            if at > *now {
                *now = at;
            }
            let later = timers.split_off(&(*now + Duration::from_nanos(1), 0));
            std::mem::replace(&mut *timers, later)
        };
        for (_, waker) in due {
            waker.wake();
        }
    }

    /// Whether a task is ready to run.
    pub fn has_ready(&self) -> bool {
        !lock(&self.inner.ready).is_empty()
    }

    /// Lets the clock run `duration` (running tasks and firing timers on the way).
    pub fn run_for(&self, duration: Duration) {
        let end = self.elapsed() + duration;
        let exec = self.clone();
        self.block_on(async move {
            let wait = end.saturating_sub(exec.elapsed());
            exec.sleep(wait).await;
        });
    }
}

/// The future of [`Executor::sleep`].
pub struct Sleep {
    exec: Executor,
    deadline: Duration,
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.exec.elapsed() >= self.deadline {
            return Poll::Ready(());
        }
        let id = self.exec.inner.next_timer.fetch_add(1, Ordering::Relaxed);
        lock(&self.exec.inner.timers).insert((self.deadline, id), cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_time_orders_sleepers() {
        let exec = Executor::new();
        let log = Arc::new(Mutex::new(Vec::new()));
        for (name, ms) in [("b", 20u64), ("a", 10), ("c", 30)] {
            let exec2 = exec.clone();
            let log = log.clone();
            exec.spawn(async move {
                exec2.sleep(Duration::from_millis(ms)).await;
                lock(&log).push((name, exec2.elapsed()));
            });
        }
        exec.run_for(Duration::from_millis(100));
        assert_eq!(
            *lock(&log),
            [
                ("a", Duration::from_millis(10)),
                ("b", Duration::from_millis(20)),
                ("c", Duration::from_millis(30))
            ]
        );
        assert_eq!(exec.elapsed(), Duration::from_millis(100));
    }

    #[test]
    #[should_panic(expected = "stuck")]
    fn a_hang_panics() {
        Executor::new().block_on(std::future::pending::<()>());
    }
}
