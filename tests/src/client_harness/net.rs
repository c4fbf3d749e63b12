//! The fake network: delivers response parts after a latency, splits bodies at random offsets,
//! and (when asked) drops streams in the middle of an event.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use mcp_proto::client::StreamId;

/// One piece of a response, as the server produced it.
#[derive(Debug, Clone)]
pub enum Part {
    /// Status and headers.
    Head(StatusCode, HeaderMap),
    /// Body bytes.
    Chunk(Bytes),
    /// Normal end of the body.
    End,
    /// The connection broke.
    Fail,
}

/// Network knobs.
#[derive(Debug, Clone, Copy)]
pub struct NetConfig {
    /// One-way latency of every part.
    pub latency: Duration,
    /// Split every body chunk at random offsets.
    pub split: bool,
    /// Per-mille chance that a body chunk of an SSE response is cut at a random offset and the
    /// stream broken there (once the stream delivered its first complete event, so that a
    /// resumable stream stays resumable).
    pub drop_per_mille: u16,
    /// Seed of the network's generator.
    pub seed: u64,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            latency: Duration::from_millis(5),
            split: true,
            drop_per_mille: 0,
            seed: 1,
        }
    }
}

/// The harness's deterministic generator: the crate-wide xorshift64* of the fuzz bodies.
pub type Rng = mcp_proto::fuzzing::rng::XorShift64Star;

/// Parts in flight, ordered by delivery time.
#[derive(Debug)]
pub struct Net {
    cfg: NetConfig,
    rng: Rng,
    seq: u64,
    queue: BTreeMap<(Instant, u64), (StreamId, Part)>,
    dead: BTreeSet<StreamId>,
    sse: BTreeSet<StreamId>,
    /// Per SSE stream: last byte delivered, and whether a blank line was delivered.
    first_event: BTreeMap<StreamId, (u8, bool)>,
    /// How many streams the network broke on purpose.
    pub drops: u32,
}

impl Net {
    /// A network.
    pub fn new(cfg: NetConfig) -> Self {
        Net {
            cfg,
            rng: Rng::from_state(cfg.seed),
            seq: 0,
            queue: BTreeMap::new(),
            dead: BTreeSet::new(),
            sse: BTreeSet::new(),
            first_event: BTreeMap::new(),
            drops: 0,
        }
    }

    /// Changes the drop rate.
    pub fn set_drop_per_mille(&mut self, p: u16) {
        self.cfg.drop_per_mille = p;
    }

    /// Queues parts of `stream` for delivery after the latency, in order.
    pub fn send(&mut self, now: Instant, stream: StreamId, parts: Vec<Part>) {
        if self.dead.contains(&stream) {
            return;
        }
        let at = now + self.cfg.latency;
        for part in parts {
            if let Part::Head(_, h) = &part
                && mcp_proto::http::content_type_is(h, mcp_proto::http::mime::TEXT_EVENT_STREAM)
            {
                self.sse.insert(stream);
            }
            match part {
                Part::Chunk(b) if self.cfg.split && b.len() > 1 => {
                    let mut rest = b;
                    while !rest.is_empty() {
                        let n = 1 + self.rng.below(rest.len() as u64) as usize;
                        let piece = rest.split_to(n.min(rest.len()));
                        self.push(at, stream, Part::Chunk(piece));
                    }
                }
                p => self.push(at, stream, p),
            }
        }
    }

    fn push(&mut self, at: Instant, stream: StreamId, part: Part) {
        self.seq += 1;
        self.queue.insert((at, self.seq), (stream, part));
    }

    /// Stops delivering to `stream` (the client aborted it, or it ended).
    pub fn kill(&mut self, stream: StreamId) {
        self.dead.insert(stream);
        self.queue.retain(|_, (s, _)| *s != stream);
    }

    /// Breaks `stream` now: pending parts are dropped and a failure is delivered.
    pub fn break_stream(&mut self, now: Instant, stream: StreamId) {
        if self.dead.contains(&stream) {
            return;
        }
        self.queue.retain(|_, (s, _)| *s != stream);
        self.push(now + self.cfg.latency, stream, Part::Fail);
    }

    /// When the next part is due.
    pub fn next_time(&self) -> Option<Instant> {
        self.queue.keys().next().map(|(t, _)| *t)
    }

    /// Whether any part is in flight for `stream`.
    pub fn is_pending(&self, stream: StreamId) -> bool {
        self.queue.values().any(|(s, _)| *s == stream)
    }

    /// The next part due at or before `now`, with random mid-event drops applied.
    pub fn pop_due(&mut self, now: Instant) -> Option<(StreamId, Part)> {
        let key = *self.queue.keys().next()?;
        if key.0 > now {
            return None;
        }
        let (stream, part) = self.queue.remove(&key)?;
        if let Part::Chunk(b) = &part
            && self.sse.contains(&stream)
            && self.cfg.drop_per_mille > 0
        {
            let st = self.first_event.entry(stream).or_insert((0, false));
            let ready = st.1;
            let mut last = st.0;
            for &c in b.iter() {
                if c == b'\n' && last == b'\n' {
                    st.1 = true;
                }
                last = c;
            }
            st.0 = last;
            if ready && self.rng.below(1000) < u64::from(self.cfg.drop_per_mille) {
                // Cut this chunk somewhere inside and break the stream there.
                let cut = self.rng.below(b.len() as u64) as usize;
                let head = b.slice(..cut);
                self.queue.retain(|_, (s, _)| *s != stream);
                self.drops += 1;
                self.push(now, stream, Part::Fail);
                self.dead.insert(stream);
                return Some((stream, Part::Chunk(head)));
            }
        }
        if matches!(part, Part::End | Part::Fail) {
            self.dead.insert(stream);
            self.queue
                .retain(|_, (s, p)| *s != stream || matches!(p, Part::Fail));
        }
        Some((stream, part))
    }
}
