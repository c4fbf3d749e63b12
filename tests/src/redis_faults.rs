//! A TCP fault proxy for Redis: the link between server instances and `redis-server` cut,
//! delayed and fragmented the way networks do (loopback only, tokio).
//!
//! [`RedisProxy`] listens on 127.0.0.1 and forwards every connection it accepts to the real
//! Redis, byte for byte, in both directions. While it is [enabled](RedisProxy::enable) it
//! breaks them, every decision drawn from a generator seeded by the run's seed, the
//! connection's number and its direction ([`XorShift64Star`], as in [`crate::faults`]):
//!
//! - **cuts**: each direction of a connection gets a byte budget, uniform in
//!   `cut_after..cut_within`; the chunk that reaches it is forwarded up to that byte only, and then
//!   *both* connections are closed, so the instance sees its link break mid-command (the
//!   instance → Redis direction: Redis gets half a command and drops it) or mid-reply (Redis
//!   → instance: the command ran, its answer is lost). A connection the instance dials again
//!   gets new budgets, so a run has a cut about every `(cut_after + cut_within) / 2` bytes
//!   (a floor above the handshake's size, whose script loads take ≈ 11 KB, lets most
//!   connections come up: with budgets below it the link would never be up);
//! - **delays**: a chunk waits `0..max_delay` before it goes on, with chance `delay_chance`;
//!   with chance `stall_chance` it waits `stall` instead (longer than the instances' command
//!   timeout: the command times out, and its answer or the command itself arrives late).
//!   Chunks of one direction keep their order;
//! - **fragments**: a chunk goes out in writes of `1..=max_fragment` bytes, so Redis and the
//!   instance's codec read commands and replies in pieces.
//!
//! Counters ([`RedisProxy::stats`]): connections, cuts (and in which direction), bytes each
//! way, delays, stalls. Disabled, the proxy forwards without breaking anything (the budgets
//! are not spent); a connection opened while disabled is broken once enabled.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use mcp_proto::fuzzing::rng::XorShift64Star;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy does to the link while enabled.
#[derive(Debug, Clone, Copy)]
pub struct RedisFaults {
    /// The generator's seed.
    pub seed: u64,
    /// Each direction of a connection is cut after a uniform number of bytes below this
    /// (`0`: never cut) ...
    pub cut_within: u64,
    /// ... and at least this.
    pub cut_after: u64,
    /// The chance that a chunk is delayed by `0..max_delay`.
    pub delay_chance: f64,
    /// The longest ordinary delay.
    pub max_delay: Duration,
    /// The chance that a chunk is held for `stall` instead.
    pub stall_chance: f64,
    /// How long a stalled chunk is held (make it longer than the command timeout).
    pub stall: Duration,
    /// Chunks go out in writes of at most this many bytes (`0`: whole).
    pub max_fragment: usize,
}

impl RedisFaults {
    /// Nothing is broken.
    pub fn none() -> Self {
        RedisFaults {
            seed: 1,
            cut_within: 0,
            cut_after: 0,
            delay_chance: 0.0,
            max_delay: Duration::ZERO,
            stall_chance: 0.0,
            stall: Duration::ZERO,
            max_fragment: 0,
        }
    }

    /// Cuts each direction of each connection after a uniform number of bytes in
    /// `bytes` (`after..within`).
    pub fn cuts(seed: u64, bytes: std::ops::Range<u64>) -> Self {
        RedisFaults {
            seed,
            cut_after: bytes.start.min(bytes.end),
            cut_within: bytes.end,
            ..RedisFaults::none()
        }
    }

    /// The same, with chunks delayed by up to `max` with chance `chance`.
    pub fn delayed(self, chance: f64, max: Duration) -> Self {
        RedisFaults {
            delay_chance: chance,
            max_delay: max,
            ..self
        }
    }

    /// The same, with chunks held for `stall` with chance `chance`.
    pub fn stalled(self, chance: f64, stall: Duration) -> Self {
        RedisFaults {
            stall_chance: chance,
            stall,
            ..self
        }
    }

    /// The same, with writes of at most `max` bytes.
    pub fn fragmented(self, max: usize) -> Self {
        RedisFaults {
            max_fragment: max,
            ..self
        }
    }
}

/// What the proxy did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RedisProxyStats {
    /// Connections accepted.
    pub connections: u64,
    /// Connections cut in the instance → Redis direction (mid-command).
    pub cuts_up: u64,
    /// Connections cut in the Redis → instance direction (mid-reply).
    pub cuts_down: u64,
    /// Bytes forwarded instance → Redis.
    pub bytes_up: u64,
    /// Bytes forwarded Redis → instance.
    pub bytes_down: u64,
    /// Chunks delayed.
    pub delays: u64,
    /// Chunks stalled.
    pub stalls: u64,
}

impl RedisProxyStats {
    /// Cuts in either direction.
    pub fn cuts(&self) -> u64 {
        self.cuts_up + self.cuts_down
    }
}

impl std::fmt::Display for RedisProxyStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} connections, {} cuts ({} mid-command, {} mid-reply), {} B up, {} B down, {} delays, {} stalls",
            self.connections,
            self.cuts(),
            self.cuts_up,
            self.cuts_down,
            self.bytes_up,
            self.bytes_down,
            self.delays,
            self.stalls
        )
    }
}

#[derive(Default)]
struct Counters {
    connections: AtomicU64,
    cuts_up: AtomicU64,
    cuts_down: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    delays: AtomicU64,
    stalls: AtomicU64,
}

struct State {
    upstream: SocketAddr,
    faults: RedisFaults,
    enabled: AtomicBool,
    counters: Counters,
}

/// The proxy (see the module docs). Dropping it stops accepting and closes every
/// connection it forwards.
pub struct RedisProxy {
    addr: SocketAddr,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for RedisProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl RedisProxy {
    /// Starts a proxy in front of the Redis at `upstream`, on 127.0.0.1 (faults disabled
    /// until [`RedisProxy::enable`]). On a tokio runtime.
    ///
    /// # Errors
    ///
    /// When it cannot bind.
    pub async fn start(upstream: SocketAddr, faults: RedisFaults) -> io::Result<RedisProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            upstream,
            faults,
            enabled: AtomicBool::new(false),
            counters: Counters::default(),
        });
        let st = state.clone();
        let accept = tokio::spawn(async move {
            // The connections' tasks end with the accept loop (aborted when the proxy drops).
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let n = st.counters.connections.fetch_add(1, Ordering::SeqCst);
                conns.spawn(forward(st.clone(), n, tcp));
                while conns.try_join_next().is_some() {}
            }
        });
        Ok(RedisProxy {
            addr,
            state,
            accept,
        })
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL instances dial: `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// Starts (or stops) breaking the link.
    pub fn enable(&self, on: bool) {
        self.state.enabled.store(on, Ordering::SeqCst);
    }

    /// What it did so far.
    pub fn stats(&self) -> RedisProxyStats {
        let c = &self.state.counters;
        let get = |a: &AtomicU64| a.load(Ordering::SeqCst);
        RedisProxyStats {
            connections: get(&c.connections),
            cuts_up: get(&c.cuts_up),
            cuts_down: get(&c.cuts_down),
            bytes_up: get(&c.bytes_up),
            bytes_down: get(&c.bytes_down),
            delays: get(&c.delays),
            stalls: get(&c.stalls),
        }
    }
}

/// Which way bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Direction {
    /// Instance → Redis (commands).
    Up,
    /// Redis → instance (replies and pushes).
    Down,
}

/// How a direction ended.
enum End {
    /// Its reader closed (or failed), or its writer could not write.
    Closed,
    /// The proxy cut it.
    Cut,
}

/// The generator of connection `n`'s `direction`: the same on every run for a seed.
fn generator(seed: u64, n: u64, direction: Direction) -> XorShift64Star {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same on every run.
    let mut h = std::hash::DefaultHasher::new();
    (seed, n, direction).hash(&mut h);
    XorShift64Star::from_seed(h.finish())
}

/// A chance drawn from `rng`: `true` with probability `p`.
fn chance(rng: &mut XorShift64Star, p: f64) -> bool {
    p > 0.0 && (rng.below(1_000_000) as f64 / 1_000_000.0) < p
}

/// Forwards connection `n` (`client`, an instance's) to Redis until either side closes or
/// the proxy cuts it; then both are closed.
async fn forward(st: Arc<State>, n: u64, client: TcpStream) {
    let Ok(upstream) = TcpStream::connect(st.upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    let up = pump(&st, n, Direction::Up, cr, uw);
    let down = pump(&st, n, Direction::Down, ur, cw);
    // The first direction to end ends the other: dropping every half closes both sockets
    // (what a stalled chunk still held is never written).
    let (direction, end) = tokio::select! {
        e = up => (Direction::Up, e),
        e = down => (Direction::Down, e),
    };
    if let End::Cut = end {
        let c = &st.counters;
        match direction {
            Direction::Up => c.cuts_up.fetch_add(1, Ordering::SeqCst),
            Direction::Down => c.cuts_down.fetch_add(1, Ordering::SeqCst),
        };
    }
}

/// One direction of connection `n`: reads chunks from `r` and writes them to `w`, breaking
/// them as [`RedisFaults`] says while the proxy is enabled.
async fn pump(
    st: &State,
    n: u64,
    direction: Direction,
    mut r: OwnedReadHalf,
    mut w: OwnedWriteHalf,
) -> End {
    let f = st.faults;
    let mut rng = generator(f.seed, n, direction);
    // Drawn when the direction first carries bytes while enabled.
    let mut budget: Option<u64> = None;
    let mut buf = vec![0u8; 16 * 1024];
    let bytes = match direction {
        Direction::Up => &st.counters.bytes_up,
        Direction::Down => &st.counters.bytes_down,
    };
    loop {
        let len = match r.read(&mut buf).await {
            Ok(0) | Err(_) => return End::Closed,
            Ok(len) => len,
        };
        let mut chunk = &buf[..len];
        let mut cut = false;
        if st.enabled.load(Ordering::SeqCst) {
            if f.cut_within > 0 {
                let left = budget.get_or_insert_with(|| {
                    let span = f.cut_within.saturating_sub(f.cut_after).max(1);
                    f.cut_after + rng.below(span)
                });
                if chunk.len() as u64 > *left {
                    chunk = &chunk[..usize::try_from(*left).unwrap_or(0)];
                    cut = true;
                } else {
                    *left -= chunk.len() as u64;
                }
            }
            if chance(&mut rng, f.stall_chance) {
                st.counters.stalls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(f.stall).await;
            } else if chance(&mut rng, f.delay_chance) {
                st.counters.delays.fetch_add(1, Ordering::SeqCst);
                let max = u64::try_from(f.max_delay.as_micros()).unwrap_or(u64::MAX);
                tokio::time::sleep(Duration::from_micros(rng.below(max.max(1)))).await;
            }
            while !chunk.is_empty() {
                let piece = if f.max_fragment > 0 {
                    let most = chunk.len().min(f.max_fragment) as u64;
                    1 + usize::try_from(rng.below(most)).unwrap_or(0)
                } else {
                    chunk.len()
                };
                let (now, rest) = chunk.split_at(piece);
                if w.write_all(now).await.is_err() {
                    return End::Closed;
                }
                bytes.fetch_add(now.len() as u64, Ordering::SeqCst);
                chunk = rest;
                if !chunk.is_empty() {
                    tokio::task::yield_now().await;
                }
            }
        } else {
            if w.write_all(chunk).await.is_err() {
                return End::Closed;
            }
            bytes.fetch_add(chunk.len() as u64, Ordering::SeqCst);
        }
        if cut {
            return End::Cut;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream that keeps what it reads until the proxy closes, and echoes nothing.
    async fn sink() -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.expect("accept");
            let mut got = Vec::new();
            let _ = tcp.read_to_end(&mut got).await;
            got
        });
        (addr, task)
    }

    #[tokio::test]
    async fn a_cut_lands_on_the_drawn_byte_and_closes_both_sides() {
        let (upstream, received) = sink().await;
        // A budget of exactly 100 bytes, fragmented writes.
        let proxy = RedisProxy::start(upstream, RedisFaults::cuts(7, 100..101).fragmented(7))
            .await
            .expect("proxy");
        proxy.enable(true);
        let mut client = TcpStream::connect(proxy.addr()).await.expect("connect");
        let sent: Vec<u8> = (0..300u32).map(|i| (i % 251) as u8).collect();
        // The proxy may close before every byte is written: a write error is a cut too.
        let _ = client.write_all(&sent).await;
        let got = tokio::time::timeout(Duration::from_secs(5), received)
            .await
            .expect("the upstream side is closed")
            .expect("the sink");
        assert_eq!(
            got,
            sent[..100],
            "forwarded up to the drawn byte, no further"
        );
        // The instance's side is closed too: it reads the end, not a byte.
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut rest))
            .await
            .expect("the instance side is closed");
        assert!(read.is_err() || rest.is_empty(), "{rest:?}");
        let stats = proxy.stats();
        assert_eq!((stats.cuts_up, stats.cuts_down), (1, 0), "{stats}");
        assert_eq!(stats.bytes_up, 100);
        assert_eq!(stats.connections, 1);
    }

    #[tokio::test]
    async fn disabled_it_forwards_everything() {
        let (upstream, received) = sink().await;
        let proxy = RedisProxy::start(upstream, RedisFaults::cuts(7, 100..101))
            .await
            .expect("proxy");
        let mut client = TcpStream::connect(proxy.addr()).await.expect("connect");
        let sent = vec![b'x'; 5000];
        client.write_all(&sent).await.expect("write");
        client.shutdown().await.expect("shutdown");
        let got = tokio::time::timeout(Duration::from_secs(5), received)
            .await
            .expect("closed")
            .expect("the sink");
        assert_eq!(got.len(), 5000);
        assert_eq!(proxy.stats().cuts(), 0);
    }
}
