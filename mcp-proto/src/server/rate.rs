//! Rate limits: token buckets per principal, per session and per client address, refused
//! with `429 Too Many Requests`, `Retry-After` and a JSON-RPC error the client can read.
//!
//! # Theory of operation
//!
//! Each configured scope ([`RateLimits`]) keeps one [`TokenBucket`] per key: the
//! authenticated principal, the session (its `Mcp-Session-Id`, once found live), the client
//! address (an IPv4 address, or the /64 prefix of an IPv6 one: one host usually holds a whole
//! /64). A bucket holds at most `burst` tokens and gains `count` tokens per `period`; each HTTP
//! request to the endpoint (POST, GET, DELETE; not a CORS preflight or other `OPTIONS`, not
//! the protected resource metadata) takes one token from every bucket that applies to it.
//! A 2025-03-26 batch is one HTTP request and takes one token (bounded by
//! [`ServerLimits::max_batch_len`](super::ServerLimits::max_batch_len)).
//!
//! Each bucket is charged as soon as its key is known, in the router's order of checks
//! (`inbound.rs`):
//!
//! ```text
//!  check (in order)            bucket charged            refusal when empty
//!  --------------------------  ------------------------  -------------------------------------
//!  path, Host/Origin, OPTIONS  —                         (their own)
//!  (before authentication)     address                   429, Retry-After, -32000 data.retryAfter
//!  authentication              principal (if any)        429 …
//!  method, headers, session    session (a live one)      429 …
//!  version, body …             —                         (their own)
//! ```
//!
//! So an unauthenticated flood is refused by address before the authenticator runs, a
//! principal is limited across its sessions and addresses, and an unknown session id costs
//! no bucket (it gets 404). A request refused by a later bucket has still spent a token of the
//! earlier ones: it was sent. A request the cluster parks while it loads the session record
//! is charged once, on arrival, not again when it runs.
//!
//! A bucket is a pure value (the time is passed in): its level is kept in units of
//! `1 / period_ns` of a token, so refill is exact integer arithmetic, and time going
//! backwards refills nothing.
//!
//! ```text
//!  bucket (level ∈ [0, burst])  | input               | next                   | answer
//!  -----------------------------+---------------------+------------------------+---------------
//!  level after refill ≥ 1       | take(now)           | level − 1              | admitted
//!  level after refill < 1       | take(now)           | level                  | refused, wait
//!  any                          | now < last          | unchanged (no refill)  | —
//! ```
//!
//! Memory is bounded: a scope tracks at most [`RateLimits::max_keys`] keys. A new key beyond
//! it first drops every full bucket (forgetting a full bucket changes nothing: a new one
//! starts full), then, if none was full, the least recently charged tenth of the keys (they
//! get a full bucket on their next request; an attacker needs more than `max_keys` live keys
//! to earn that, and the concurrency caps still hold). Each sweep frees at least a tenth of
//! the table, so its cost is amortized over many insertions. Sessions and principals are
//! bounded by the session cap and the authenticator; addresses by this cap.
//!
//! Limits are **per instance**: in a cluster of N instances behind a balancer a key may get
//! up to N times its rate. Sharing buckets through the cluster store would cost a store round
//! trip per request; configure `rate / N` where that matters.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use super::error::ProtocolError;
use super::{ExchangeId, RequestHead, Router, SessionHandle};

/// One rate: `count` requests per `period`, with bursts of up to `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    count: u32,
    period: Duration,
    burst: u32,
}

impl RateLimit {
    /// `count` requests per `period`, bursts of up to `burst` (each at least 1; a zero
    /// period is taken as 1 ns).
    pub fn new(count: u32, period: Duration, burst: u32) -> Self {
        RateLimit {
            count: count.max(1),
            period: period.max(Duration::from_nanos(1)),
            burst: burst.max(1),
        }
    }

    /// `rate` requests per second, bursts of up to `burst`.
    pub fn per_second(rate: u32, burst: u32) -> Self {
        RateLimit::new(rate, Duration::from_secs(1), burst)
    }

    /// Tokens gained per [`period`](Self::period).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The period of [`count`](Self::count).
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The most tokens a bucket holds (the largest burst admitted at once).
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// One token, in the bucket's units.
    fn unit(&self) -> u128 {
        self.period.as_nanos()
    }

    fn capacity(&self) -> u128 {
        self.unit() * u128::from(self.burst)
    }
}

/// The rate limits of a [`Router`](super::Router) (part of
/// [`ServerLimits`](super::ServerLimits)); the crate README's "Rate limits" section says what
/// is counted, where and how memory stays bounded. **Off by default**: the concurrency caps already bound what one client can
/// hold, a per-address default would throttle every client behind one proxy or NAT together,
/// and a per-session default would throttle legitimate heavy clients (a benchmark's single
/// session makes thousands of calls a second). Turn each scope on with its builder method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RateLimits {
    /// One bucket per authenticated principal (requests without one are not charged here).
    pub per_principal: Option<RateLimit>,
    /// One bucket per live session (2026-07-28 requests have none).
    pub per_session: Option<RateLimit>,
    /// One bucket per client address (IPv4, or the /64 of IPv6), when the adapter knows it.
    pub per_address: Option<RateLimit>,
    /// The most keys tracked per scope (default 10,000); see the module docs for eviction.
    pub max_keys: usize,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits {
            per_principal: None,
            per_session: None,
            per_address: None,
            max_keys: 10_000,
        }
    }
}

impl RateLimits {
    /// No rate limits (the default).
    pub fn off() -> Self {
        RateLimits::default()
    }

    /// Limits each authenticated principal to `rate` requests per second, bursts of `burst`.
    pub fn per_principal(mut self, rate: u32, burst: u32) -> Self {
        self.per_principal = Some(RateLimit::per_second(rate, burst));
        self
    }

    /// Limits each session to `rate` requests per second, bursts of `burst`.
    pub fn per_session(mut self, rate: u32, burst: u32) -> Self {
        self.per_session = Some(RateLimit::per_second(rate, burst));
        self
    }

    /// Limits each client address to `rate` requests per second, bursts of `burst`. Behind a
    /// reverse proxy every client shares the proxy's address unless the proxy is trusted
    /// to name the client.
    pub fn per_address(mut self, rate: u32, burst: u32) -> Self {
        self.per_address = Some(RateLimit::per_second(rate, burst));
        self
    }

    /// The most keys tracked per scope (at least 1).
    pub fn with_max_keys(mut self, max: usize) -> Self {
        self.max_keys = max.max(1);
        self
    }

    /// Whether any scope is on.
    pub fn is_on(&self) -> bool {
        self.per_principal.is_some() || self.per_session.is_some() || self.per_address.is_some()
    }
}

/// Which bucket refused a request ([`ProtocolError::RateLimited`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RateScope {
    /// The authenticated principal's.
    Principal,
    /// The session's.
    Session,
    /// The client address's.
    Address,
}

impl std::fmt::Display for RateScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RateScope::Principal => "principal",
            RateScope::Session => "session",
            RateScope::Address => "address",
        })
    }
}

/// A token bucket: a pure value, the time passed in. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenBucket {
    /// Tokens, in units of `1 / period_ns` token.
    level: u128,
    /// The latest instant seen.
    last: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub(crate) fn full(limit: &RateLimit, now: Instant) -> Self {
        TokenBucket {
            level: limit.capacity(),
            last: now,
        }
    }

    fn refill(&mut self, limit: &RateLimit, now: Instant) {
        if now > self.last {
            let gained = (now - self.last).as_nanos() * u128::from(limit.count);
            self.level = self.level.saturating_add(gained).min(limit.capacity());
            self.last = now;
        }
    }

    /// Takes one token, or says how long until one is there.
    pub(crate) fn take(&mut self, limit: &RateLimit, now: Instant) -> Result<(), Duration> {
        self.refill(limit, now);
        let unit = limit.unit();
        if self.level >= unit {
            self.level -= unit;
            return Ok(());
        }
        let missing = unit - self.level;
        let nanos = missing.div_ceil(u128::from(limit.count));
        Err(Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }

    /// Whether the bucket is full at `now` (forgetting it would change nothing).
    pub(crate) fn is_full(&self, limit: &RateLimit, now: Instant) -> bool {
        let mut b = *self;
        b.refill(limit, now);
        b.level >= limit.capacity()
    }
}

/// One scope's buckets, at most `max_keys` of them.
#[derive(Debug)]
struct Table<K> {
    buckets: HashMap<K, TokenBucket>,
}

impl<K> Default for Table<K> {
    fn default() -> Self {
        Table {
            buckets: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> Table<K> {
    fn charge<Q>(
        &mut self,
        limit: &RateLimit,
        max_keys: usize,
        key: &Q,
        owned: impl FnOnce() -> K,
        now: Instant,
    ) -> Result<(), Duration>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(b) = self.buckets.get_mut(key) {
            return b.take(limit, now);
        }
        if self.buckets.len() >= max_keys.max(1) {
            self.evict(limit, max_keys.max(1), now);
        }
        let mut b = TokenBucket::full(limit, now);
        let answer = b.take(limit, now);
        self.buckets.insert(owned(), b);
        answer
    }

    /// Makes room: every full bucket goes; if that freed nothing, the least recently charged
    /// tenth (at least one).
    fn evict(&mut self, limit: &RateLimit, max_keys: usize, now: Instant) {
        self.buckets.retain(|_, b| !b.is_full(limit, now));
        if self.buckets.len() < max_keys {
            return;
        }
        let target = max_keys - (max_keys / 10).max(1);
        let mut by_age: Vec<(Instant, K)> = self
            .buckets
            .iter()
            .map(|(k, b)| (b.last, k.clone()))
            .collect();
        let excess = by_age.len().saturating_sub(target);
        if excess == 0 {
            return;
        }
        by_age.select_nth_unstable_by_key(excess - 1, |(at, _)| *at);
        for (_, k) in by_age.into_iter().take(excess) {
            self.buckets.remove(&k);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.buckets.len()
    }

    fn forget<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.buckets.remove(key);
    }
}

/// The router's buckets (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    principals: Table<Box<str>>,
    sessions: Table<SessionHandle>,
    addresses: Table<IpAddr>,
    /// The newest exchange charged on arrival: a parked request run again under its old
    /// [`ExchangeId`] is not charged twice (exchange ids only grow).
    seen: u64,
}

/// The per-address key: IPv4 as is (IPv4-mapped IPv6 too), IPv6 by its /64 prefix.
fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

fn refused(scope: RateScope, wait: Duration) -> ProtocolError {
    ProtocolError::RateLimited {
        scope,
        retry_after: wait,
    }
}

impl Router {
    /// Whether `stream` arrives now (not a parked request run again): records it.
    pub(super) fn rate_first_sight(&mut self, stream: ExchangeId) -> bool {
        if stream.0 > self.rate.seen {
            self.rate.seen = stream.0;
            true
        } else {
            false
        }
    }

    /// Charges the client address's bucket (before authentication).
    pub(super) fn charge_address(
        &mut self,
        fresh: bool,
        head: &RequestHead<'_>,
    ) -> Result<(), ProtocolError> {
        let rates = &self.config.limits.rate;
        let (Some(limit), true, Some(ip)) = (
            rates.per_address,
            fresh,
            self.config.security.client_address(head),
        ) else {
            return Ok(());
        };
        let key = address_key(ip);
        self.rate
            .addresses
            .charge(&limit, rates.max_keys, &key, || key, self.now)
            .map_err(|w| refused(RateScope::Address, w))
    }

    /// Charges the authenticated principal's bucket.
    pub(super) fn charge_principal(
        &mut self,
        fresh: bool,
        principal: Option<&str>,
    ) -> Result<(), ProtocolError> {
        let rates = &self.config.limits.rate;
        let (Some(limit), true, Some(p)) = (rates.per_principal, fresh, principal) else {
            return Ok(());
        };
        self.rate
            .principals
            .charge(&limit, rates.max_keys, p, || p.into(), self.now)
            .map_err(|w| refused(RateScope::Principal, w))
    }

    /// Charges a live session's bucket.
    pub(super) fn charge_session(&mut self, session: SessionHandle) -> Result<(), ProtocolError> {
        let rates = &self.config.limits.rate;
        let Some(limit) = rates.per_session else {
            return Ok(());
        };
        self.rate
            .sessions
            .charge(&limit, rates.max_keys, &session, || session, self.now)
            .map_err(|w| refused(RateScope::Session, w))
    }

    /// A session ended: its bucket goes with it.
    pub(super) fn forget_session_rate(&mut self, session: SessionHandle) {
        self.rate.sessions.forget(&session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t0() -> Instant {
        Instant::now()
    }

    #[test]
    fn a_full_bucket_admits_its_burst_then_says_how_long() {
        let limit = RateLimit::per_second(2, 3);
        let now = t0();
        let mut b = TokenBucket::full(&limit, now);
        for _ in 0..3 {
            assert_eq!(b.take(&limit, now), Ok(()));
        }
        assert_eq!(b.take(&limit, now), Err(Duration::from_millis(500)));
        // Half a token later: a quarter second to go.
        let later = now + Duration::from_millis(250);
        assert_eq!(b.take(&limit, later), Err(Duration::from_millis(250)));
        assert_eq!(b.take(&limit, now + Duration::from_millis(500)), Ok(()));
    }

    #[test]
    fn time_going_backwards_refills_nothing() {
        let limit = RateLimit::per_second(1, 1);
        let now = t0() + Duration::from_secs(10);
        let mut b = TokenBucket::full(&limit, now);
        assert!(b.take(&limit, now).is_ok());
        assert!(b.take(&limit, now - Duration::from_secs(5)).is_err());
        assert!(b.take(&limit, now + Duration::from_millis(999)).is_err());
        assert!(b.take(&limit, now + Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn ipv6_is_keyed_by_its_64_prefix_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(c));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(address_key(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn a_table_never_tracks_more_than_max_keys() {
        let limit = RateLimit::per_second(1, 5);
        let now = t0();
        let mut t: Table<u32> = Table::default();
        // Every key keeps a non-full bucket (one token spent), so only age-based eviction
        // can make room.
        for k in 0..1_000u32 {
            let at = now + Duration::from_micros(u64::from(k));
            assert!(t.charge(&limit, 100, &k, || k, at).is_ok());
            assert!(t.len() <= 100, "{} keys tracked", t.len());
        }
        // The newest keys survive; the oldest went.
        assert!(t.buckets.contains_key(&999));
        assert!(!t.buckets.contains_key(&0));
    }

    #[test]
    fn full_buckets_are_dropped_first() {
        let limit = RateLimit::per_second(1, 1);
        let now = t0();
        let mut t: Table<u32> = Table::default();
        for k in 0..10u32 {
            assert!(t.charge(&limit, 10, &k, || k, now).is_ok());
        }
        // Key 0 is charged again later, so it is the most recently used but still empty; the
        // others refill to full by then and are all dropped on the next insertion.
        let later = now + Duration::from_secs(2);
        assert!(t.charge(&limit, 10, &0, || 0, later).is_ok());
        assert!(t.charge(&limit, 10, &0, || 0, later).is_err());
        assert!(t.charge(&limit, 10, &100, || 100, later).is_ok());
        assert_eq!(t.len(), 2);
        assert!(
            t.charge(&limit, 10, &0, || 0, later).is_err(),
            "the empty bucket was kept"
        );
    }

    proptest! {
        /// Never more than `burst + count · elapsed / period` admitted in any window, and
        /// exactly that many when the requests keep coming (refill is exact); instants that
        /// go backwards change nothing.
        #[test]
        fn bucket_admits_exactly_its_rate(
            count in 1u32..50,
            period_ms in 1u64..5_000,
            burst in 1u32..20,
            steps in proptest::collection::vec((0u64..400, any::<bool>()), 1..300),
        ) {
            let limit = RateLimit::new(count, Duration::from_millis(period_ms), burst);
            let start = t0();
            let mut b = TokenBucket::full(&limit, start);
            let mut clock = 0u64; // ms since start, the newest instant seen
            let mut admitted: Vec<u64> = Vec::new();
            for (dt, back) in steps {
                let at_ms = if back { clock.saturating_sub(dt) } else { clock + dt };
                let at = start + Duration::from_millis(at_ms);
                let before = b;
                let r = b.take(&limit, at);
                if back && at_ms < clock {
                    // The past: no refill, so the answer is the one at the newest instant.
                    let mut same = before;
                    let r2 = same.take(&limit, start + Duration::from_millis(clock));
                    prop_assert_eq!(r.is_ok(), r2.is_ok());
                } else {
                    clock = at_ms;
                }
                if r.is_ok() {
                    admitted.push(clock);
                } else {
                    // Refused: after the wait it says, a token is there.
                    let wait = r.unwrap_err();
                    prop_assert!(wait > Duration::ZERO);
                    let mut probe = b;
                    let then = start + Duration::from_millis(clock) + wait;
                    prop_assert!(probe.take(&limit, then).is_ok());
                    let mut early = b;
                    if wait > Duration::from_nanos(1) {
                        let just_before = then - Duration::from_nanos(1);
                        prop_assert!(early.take(&limit, just_before).is_err());
                    }
                }
            }
            // Any window [a, z] of admissions holds at most burst + count·(z − a)/period.
            for i in 0..admitted.len() {
                for j in i..admitted.len() {
                    let n = (j - i + 1) as u128;
                    let span = u128::from(admitted[j] - admitted[i]);
                    let bound = u128::from(burst) * u128::from(period_ms)
                        + u128::from(count) * span;
                    prop_assert!(n * u128::from(period_ms) <= bound,
                        "{n} admitted in {span} ms");
                }
            }
        }
    }
}
