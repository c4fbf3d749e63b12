// S-POST-23.
//! Deterministic, jittered, capped exponential backoff, and the failure budget that ends a
//! reconnect loop.
//!
//! # Theory of operation
//!
//! Every reconnect the client schedules (the GET listening stream, and the GET that resumes a
//! broken POST stream) asks [`Backoff::delay`] how long to wait. The answer is
//!
//! ```text
//! base   = min(max, initial · 2^attempt)
//! delay  = base − uniform[0, base · jitter_percent / 100]
//! floor  = min(server `retry` or `Retry-After`, max_server_retry)
//! result = max(delay, floor)                  ∈ [floor, max(max, floor)]
//! ```
//!
//! except for the first reconnect (`attempt` 0: the stream made progress before it ended, or
//! this is the first try) when the server gave a non-zero `retry` or `Retry-After`: then the
//! delay is exactly that floor (SEP-1699: the client waits the given number of milliseconds;
//! a jittered backoff above it would reconnect late, e.g. 500–1000 ms for `retry: 500`).
//! Failed attempts after it back off as above, still floored.
//!
//! So a delay is never below what the server asked for, never above the cap (unless the server
//! itself asked for more, bounded by `max_server_retry`), and clients that lost the same server
//! at the same moment spread out instead of reconnecting in lock-step. The jitter comes from a
//! SplitMix64 generator seeded from [`super::ClientConfig`]: the core reads no randomness source,
//! and the same seed gives the same delays in tests.
//!
//! [`FailureWindow`] counts failures in a sliding window; once `max_failures` fall inside
//! `window`, the loop ends with a typed event instead of storming (peer clients have looped
//! forever: a clean close reset their attempt counter, or a 404 after a restart never ended
//! the retries).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How reconnect delays grow. See the module docs for the formula.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffConfig {
    /// Delay before the first reconnect (1 s, as mcp-go's client's fixed retry).
    pub initial: Duration,
    /// Cap of the exponential growth (30 s).
    pub max: Duration,
    /// How much of each delay is random, in percent, subtracted from it (50: a delay of `base`
    /// becomes uniform in `[base/2, base]`). Values above 100 act as 100.
    pub jitter_percent: u8,
    /// The largest server `retry` (or `Retry-After`) the client honours (10 min); a larger one
    /// is clamped, so that a hostile value cannot park a stream forever.
    pub max_server_retry: Duration,
    // S-POST-23.
    /// The smallest server `retry` honoured as given (100 ms): a first reconnect waits exactly
    /// the server's `retry`, but a tiny one (`retry: 1`) is raised to this, so that
    /// a server that primes and closes every stream cannot make the client poll at 1 kHz.
    pub min_server_retry: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            jitter_percent: 50,
            max_server_retry: Duration::from_secs(600),
            min_server_retry: Duration::from_millis(100),
        }
    }
}

impl BackoffConfig {
    /// The shortest delay this configuration can produce before any server floor:
    /// `initial` minus its full jitter (for the defaults, 500 ms).
    pub fn min_delay(&self) -> Duration {
        let j = u128::from(self.jitter_percent.min(100));
        let base = self.initial.min(self.max).as_nanos();
        nanos(base - base * j / 100)
    }

    /// The longest delay for a given server floor: `max(max, min(floor, max_server_retry))`.
    pub fn max_delay(&self, floor: Option<Duration>) -> Duration {
        let floor = floor.map_or(Duration::ZERO, |f| f.min(self.max_server_retry));
        self.max.max(floor)
    }
}

/// A bounded number of failures in a sliding time window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureBudget {
    /// Failures tolerated inside `window`; the one that reaches this number ends the loop.
    pub max_failures: u32,
    /// The sliding window.
    pub window: Duration,
}

impl Default for FailureBudget {
    fn default() -> Self {
        FailureBudget {
            max_failures: 10,
            window: Duration::from_secs(300),
        }
    }
}

/// SplitMix64: tiny, seedable, good enough for jitter (not for anything secret).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n]`.
    pub(crate) fn up_to(&mut self, n: u128) -> u128 {
        if n == 0 {
            return 0;
        }
        // 64 random bits scaled to the range: bias is below 2^-64 · n, irrelevant for jitter.
        let r = u128::from(self.next_u64());
        (r * (n + 1)) >> 64
    }
}

/// The delay calculator: configuration plus the seeded generator.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    cfg: BackoffConfig,
    rng: SplitMix64,
}

impl Backoff {
    pub(crate) fn new(cfg: BackoffConfig, seed: u64) -> Self {
        Backoff {
            cfg,
            rng: SplitMix64::new(seed),
        }
    }

    /// The delay before reconnect number `attempt` (0-based), never below `floor` (clamped to
    /// `max_server_retry`), and exactly a non-zero `floor` at attempt 0.
    pub(crate) fn delay(&mut self, attempt: u32, floor: Option<Duration>) -> Duration {
        if attempt == 0
            && let Some(f) = floor.filter(|f| !f.is_zero())
        {
            return f
                .max(self.cfg.min_server_retry)
                .min(self.cfg.max_server_retry);
        }
        let cap = self.cfg.max.as_nanos();
        let initial = self.cfg.initial.as_nanos().min(cap);
        let base = initial
            .checked_shl(attempt.min(64))
            .filter(|b| *b >> attempt.min(64) == initial)
            .map_or(cap, |b| b.min(cap));
        let jitter = base * u128::from(self.cfg.jitter_percent.min(100)) / 100;
        let delay = nanos(base - self.rng.up_to(jitter));
        let floor = floor.map_or(Duration::ZERO, |f| f.min(self.cfg.max_server_retry));
        delay.max(floor)
    }

    /// The wait before a message refused with `Retry-After: d` goes again: never less than
    /// `d`, and up to half of `jitter_percent` of it more (25 % by default), so that the
    /// clients a server pushed back at the same moment do not all come back at the same
    /// moment, to be pushed back again.
    pub(crate) fn spread(&mut self, d: Duration) -> Duration {
        let d = d.min(self.cfg.max_server_retry);
        let most = d.as_nanos() * u128::from(self.cfg.jitter_percent.min(100)) / 200;
        d.saturating_add(nanos(self.rng.up_to(most)))
    }
}

/// `now + d`, saturating far in the future instead of panicking on overflow (a configuration
/// may hold `Duration::MAX`).
pub(crate) fn after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

fn nanos(n: u128) -> Duration {
    let secs = u64::try_from(n / 1_000_000_000).unwrap_or(u64::MAX);
    // The remainder of a division by 10^9 fits in u32.
    Duration::new(secs, (n % 1_000_000_000) as u32)
}

/// Failures inside a sliding window, bounded by a [`FailureBudget`].
#[derive(Debug, Clone)]
pub(crate) struct FailureWindow {
    budget: FailureBudget,
    times: VecDeque<Instant>,
}

impl FailureWindow {
    pub(crate) fn new(budget: FailureBudget) -> Self {
        FailureWindow {
            budget,
            times: VecDeque::new(),
        }
    }

    /// Records a failure at `now`; returns `true` when the budget is now exhausted.
    pub(crate) fn record(&mut self, now: Instant) -> bool {
        while let Some(first) = self.times.front() {
            if now.saturating_duration_since(*first) >= self.budget.window {
                self.times.pop_front();
            } else {
                break;
            }
        }
        self.times.push_back(now);
        // The deque never holds more than `max_failures` entries: once it reaches that many,
        // the caller stops the loop and clears the window.
        self.times.len() >= self.budget.max_failures.max(1) as usize
    }

    /// Failures currently inside the window.
    pub(crate) fn count(&self) -> u32 {
        u32::try_from(self.times.len()).unwrap_or(u32::MAX)
    }

    pub(crate) fn clear(&mut self) {
        self.times.clear();
    }
}

/// `Retry-After` in delta-seconds (an HTTP-date needs a wall clock, which the core has not).
pub(crate) fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_double_and_cap() {
        let cfg = BackoffConfig {
            jitter_percent: 0,
            ..BackoffConfig::default()
        };
        let mut b = Backoff::new(cfg, 1);
        let got: Vec<u64> = (0..8).map(|a| b.delay(a, None).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(b.delay(200, None), Duration::from_secs(30));
    }

    #[test]
    fn s_post_23_jitter_stays_in_range_and_respects_the_server_floor() {
        let cfg = BackoffConfig::default();
        let mut b = Backoff::new(cfg, 42);
        for attempt in 0..40 {
            let d = b.delay(attempt, None);
            assert!(d >= cfg.min_delay(), "{d:?}");
            assert!(d <= cfg.max, "{d:?}");
            let floor = Duration::from_millis(3000);
            let d = b.delay(attempt, Some(floor));
            assert!(d >= floor && d <= cfg.max_delay(Some(floor)));
            let huge = Duration::from_secs(10_000);
            let d = b.delay(attempt, Some(huge));
            assert_eq!(d, cfg.max_server_retry);
        }
        assert_eq!(cfg.min_delay(), Duration::from_millis(500));
    }

    #[test]
    fn sep_1699_the_first_reconnect_waits_exactly_the_servers_retry() {
        let mut b = Backoff::new(BackoffConfig::default(), 3);
        let retry = Duration::from_millis(500);
        for _ in 0..20 {
            assert_eq!(b.delay(0, Some(retry)), retry);
        }
        // Later attempts back off above it; a zero retry gives no pacing, so the backoff stays.
        assert!(b.delay(1, Some(retry)) >= Duration::from_secs(1));
        assert!(b.delay(0, Some(Duration::ZERO)) >= BackoffConfig::default().min_delay());
    }

    #[test]
    fn same_seed_same_delays_different_seed_different_delays() {
        let cfg = BackoffConfig::default();
        let a: Vec<_> = {
            let mut b = Backoff::new(cfg, 7);
            (0..10).map(|i| b.delay(i, None)).collect()
        };
        let b2: Vec<_> = {
            let mut b = Backoff::new(cfg, 7);
            (0..10).map(|i| b.delay(i, None)).collect()
        };
        let c: Vec<_> = {
            let mut b = Backoff::new(cfg, 8);
            (0..10).map(|i| b.delay(i, None)).collect()
        };
        assert_eq!(a, b2);
        assert_ne!(a, c);
    }

    #[test]
    fn failure_window_slides() {
        let t0 = Instant::now();
        let mut w = FailureWindow::new(FailureBudget {
            max_failures: 3,
            window: Duration::from_secs(10),
        });
        assert!(!w.record(t0));
        assert!(!w.record(t0 + Duration::from_secs(5)));
        // The first failure left the window: still two inside.
        assert!(!w.record(t0 + Duration::from_secs(12)));
        assert_eq!(w.count(), 2);
        assert!(w.record(t0 + Duration::from_secs(13)));
    }

    #[test]
    fn s_post_23_a_tiny_server_retry_is_raised_to_the_minimum_not_obeyed_at_1_khz() {
        let mut b = Backoff::new(BackoffConfig::default(), 7);
        assert_eq!(
            b.delay(0, Some(Duration::from_millis(1))),
            Duration::from_millis(100)
        );
        assert_eq!(
            b.delay(0, Some(Duration::from_millis(500))),
            Duration::from_millis(500)
        );
        assert_eq!(
            b.delay(0, Some(Duration::from_secs(3600))),
            Duration::from_secs(600)
        );
    }
}
