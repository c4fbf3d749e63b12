//! Scale in one process: how one instance of ours holds many sessions, many open GET streams
//! and many concurrent streaming calls, with the in-memory store and on Redis.
//!
//! ```text
//! cargo run --release -p mcp-bench --bin bench-scale [-- --quick] [--runtimes tokio,smol] [--stores memory,redis]
//! ```
//!
//! Each phase gets a fresh server child (this binary re-executed with `--serve`, pinned to
//! core 0 with its redis-server, if any; the hyper load generator of `mcp_bench::client` has
//! core 1), so that what one phase leaves behind never counts in the next:
//!
//! 1. **idle sessions**: sessions opened (`initialize` + `notifications/initialized`) over 16
//!    keep-alive connections up to each checkpoint (1k, 10k, 100k) and left idle. Per span
//!    between checkpoints: the server's VmRSS growth per session (flat means the last span's
//!    figure is close to the middle one's), sessions opened per second, server CPU per open,
//!    and with Redis the store's `used_memory` growth and CPU per session.
//! 2. **GET streams**: 10,000 sessions, each with its GET stream open on its own connection;
//!    heartbeats every second. The server's VmRSS growth per stream (over the sessions'
//!    own), streams opened per second, then a window of 10 heartbeat intervals: heartbeats
//!    each stream received (every stream must get them, and none may end), server CPU per
//!    heartbeat round (all streams) and per heartbeat.
//! 3. **streaming calls**: 1,000 sessions × 10 concurrent `tools/call stream` (5 progress
//!    notifications 100 ms apart, then the result) on 10,000 connections, 3 rounds: calls
//!    per second, latency p50/p99 beside the 500 ms the tool sleeps, server CPU per call, the
//!    server's peak VmRSS growth per call in flight (sampled every 20 ms). Every reply is
//!    checked: each progress notification, in order, then the result.
//!
//! Phases 1 and 3 run three times (`--repeat`), every configuration once per repetition,
//! so that a busy spell of the shared machine lands in one repetition of each: the tables
//! show each configuration's median repetition, and the goals compare the Redis store with
//! memory by the median of the repetitions' ratios (each repetition's Redis phase ran beside
//! its memory phase), with their range.
//!
//! Any wrong reply, refused session or stream that ends, in any repetition, makes the exit
//! status 1. `--quick` shrinks every size and runs each phase once (a smoke test for CI).

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use mcp_bench::client::{Conn, Target, call_stream};
use mcp_bench::echo;
use mcp_bench::instance::{self, Rt, on_core_0};
use mcp_bench::load::{open_many, percentile};
use mcp_bench::pin_to;
use mcp_bench::process::{ServerProcess, cpu_ns, rss_bytes};
use mcp_tests::services::{Redis, Resp, RespValue};

/// The phases' names on the command line, in the order they run (an index into
/// `Plan::phases`).
const PHASES: [&str; 3] = ["idle", "streams", "calls"];
/// What a phase `--phases` left out reports (not a failure).
const NOT_RUN: &str = "not run (--phases)";
const IDLE: usize = 0;
const STREAMS: usize = 1;
const CALLS: usize = 2;

/// Keep-alive connections the idle-session phase opens sessions over.
const OPEN_CONNECTIONS: usize = 16;
/// Connections (GET streams, call connections) opened at once.
const CONNECT_IN_FLIGHT: usize = 64;
/// How often the streaming phase samples the server's VmRSS.
const RSS_SAMPLE: Duration = Duration::from_millis(20);

// ------------------------------------------------------------------------------------------
// What is measured.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Memory,
    Redis,
    /// Redis with the link's operations one after the other's answer
    /// (`RedisConfig::max_in_flight` 1): what the link did before it pipelined.
    RedisSerial,
}

impl Store {
    /// What `--stores` may name.
    const NAMED: [Store; 3] = [Store::Memory, Store::Redis, Store::RedisSerial];
    /// The default.
    const ALL: [Store; 2] = [Store::Memory, Store::Redis];

    fn name(self) -> &'static str {
        match self {
            Store::Memory => "memory",
            Store::Redis => "redis",
            Store::RedisSerial => "redis-serial",
        }
    }

    fn redis(self) -> bool {
        !matches!(self, Store::Memory)
    }
}

#[derive(Debug, Clone)]
struct Plan {
    /// Idle sessions open at each checkpoint.
    checkpoints: Vec<usize>,
    /// GET streams.
    streams: usize,
    heartbeat: Duration,
    /// Heartbeat intervals in the measured window.
    rounds: u32,
    /// Streaming calls: sessions, concurrent calls per session, rounds of calls.
    call_sessions: usize,
    per_session: usize,
    call_rounds: usize,
    steps: u64,
    delay_ms: u64,
    /// Which phases run (`--phases`).
    phases: [bool; 3],
    /// How many times the idle-session and streaming-call phases run (`--repeat`).
    repeats: usize,
}

impl Plan {
    fn full() -> Plan {
        Plan {
            checkpoints: vec![1_000, 10_000, 100_000],
            streams: 10_000,
            heartbeat: Duration::from_secs(1),
            rounds: 10,
            call_sessions: 1_000,
            per_session: 10,
            call_rounds: 3,
            steps: 5,
            delay_ms: 100,
            phases: [true; 3],
            repeats: 3,
        }
    }

    fn quick() -> Plan {
        Plan {
            checkpoints: vec![100, 300, 1_000],
            streams: 200,
            heartbeat: Duration::from_millis(200),
            rounds: 3,
            call_sessions: 10,
            per_session: 4,
            call_rounds: 1,
            steps: 3,
            delay_ms: 20,
            phases: [true; 3],
            repeats: 1,
        }
    }

    fn max_sessions(&self) -> usize {
        let most = self.checkpoints.iter().copied().max().unwrap_or(0);
        most.max(self.streams).max(self.call_sessions) + 100
    }
}

// ------------------------------------------------------------------------------------------
// Arguments.

const USAGE: &str = "usage: bench-scale [--quick] [--runtimes tokio,smol] [--stores memory,redis,redis-serial] [--baseline PATH]
       bench-scale --serve tokio|smol --max-sessions N --heartbeat-ms MS [--redis URL --instance NAME [--redis-in-flight N]]
  --quick     small sizes: a smoke test (exit status 1 on any wrong reply)
  --runtimes  which of our adapters to measure (default: tokio,smol)
  --stores    which session stores (default: memory,redis; redis-serial: Redis with one
              store operation at a time, as the link ran before it pipelined)
  --phases    which phases (default: idle,streams,calls)
  --streams   GET streams in the streams phase (default 10000)
  --repeat    how many times the idle-session and streaming-call phases run, every
              configuration once per repetition (default 3, --quick 1): the tables show
              the median repetition, the goals the median of each repetition's ratio
  --baseline  the bench-scale binary of another build: its servers run every phase too
              (rows `tokio@base`, `smol@base`), interleaved with this build's, and the
              goals compare after with before
  --serve     run one instance (what the benchmark starts in a child process)";

enum Mode {
    Bench {
        plan: Plan,
        runtimes: Vec<Rt>,
        stores: Vec<Store>,
        quick: bool,
        baseline: Option<std::path::PathBuf>,
    },
    Serve {
        rt: Rt,
        max_sessions: usize,
        heartbeat: Duration,
        redis: Option<instance::RedisStore>,
    },
}

fn parse_args() -> Result<Mode, String> {
    let mut plan = Plan::full();
    let mut quick = false;
    let mut runtimes = Rt::ALL.to_vec();
    let mut stores = Store::ALL.to_vec();
    let mut serve = None;
    let mut max_sessions = None;
    let mut heartbeat = None;
    let mut redis = None;
    let mut instance = None;
    let mut in_flight = None;
    let mut phases = None;
    let mut streams = None;
    let mut repeats = None;
    let mut baseline = None;
    let mut args = std::env::args().skip(1);
    let number = |flag: &str, v: Option<String>| -> Result<u64, String> {
        let v = v.ok_or(format!("{flag} needs a number"))?;
        v.parse().map_err(|e| format!("{flag} {v:?}: {e}"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => {
                plan = Plan::quick();
                quick = true;
            }
            "--runtimes" => {
                runtimes = Rt::parse_list(&args.next().ok_or("--runtimes needs a list")?)?;
            }
            "--stores" => {
                let list = args.next().ok_or("--stores needs a list")?;
                stores = list
                    .split(',')
                    .map(|n| {
                        Store::NAMED
                            .into_iter()
                            .find(|s| s.name() == n)
                            .ok_or(format!("unknown store {n:?}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--phases" => {
                let list = args.next().ok_or("--phases needs a list")?;
                let mut on = [false; 3];
                for n in list.split(',') {
                    let i = PHASES
                        .iter()
                        .position(|p| *p == n)
                        .ok_or(format!("unknown phase {n:?}"))?;
                    on[i] = true;
                }
                phases = Some(on);
            }
            "--streams" => streams = Some(number(&arg, args.next())? as usize),
            "--repeat" => repeats = Some(number(&arg, args.next())? as usize),
            "--baseline" => {
                let path = args.next().ok_or("--baseline needs a path")?;
                baseline = Some(std::path::PathBuf::from(path));
            }
            "--serve" => {
                let n = args.next().ok_or("--serve needs a runtime")?;
                serve = Some(Rt::parse(&n).ok_or(format!("unknown runtime {n:?}"))?);
            }
            "--max-sessions" => max_sessions = Some(number(&arg, args.next())? as usize),
            "--heartbeat-ms" => {
                heartbeat = Some(Duration::from_millis(number(&arg, args.next())?));
            }
            "--redis" => redis = Some(args.next().ok_or("--redis needs a URL")?),
            "--instance" => instance = Some(args.next().ok_or("--instance needs a name")?),
            "--redis-in-flight" => in_flight = Some(number(&arg, args.next())? as usize),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if let Some(rt) = serve {
        let redis = instance::store_args(redis, instance, in_flight)
            .map_err(|e| format!("{e}\n{USAGE}"))?;
        return Ok(Mode::Serve {
            rt,
            max_sessions: max_sessions.ok_or("--serve needs --max-sessions")?,
            heartbeat: heartbeat.ok_or("--serve needs --heartbeat-ms")?,
            redis,
        });
    }
    if stores.is_empty() {
        return Err(format!("--stores names no store\n{USAGE}"));
    }
    if let Some(on) = phases {
        plan.phases = on;
    }
    if let Some(n) = streams {
        plan.streams = n.max(1);
    }
    if let Some(n) = repeats {
        plan.repeats = n.max(1);
    }
    Ok(Mode::Bench {
        plan,
        runtimes,
        stores,
        quick,
        baseline,
    })
}

fn main() -> ExitCode {
    match parse_args() {
        Ok(Mode::Serve {
            rt,
            max_sessions,
            heartbeat,
            redis,
        }) => {
            let config = echo::config()
                .with_max_sessions(max_sessions)
                .with_heartbeat_interval(Some(heartbeat));
            instance::serve(
                rt,
                "127.0.0.1:0",
                0,
                echo::streaming_server(),
                config,
                redis.as_ref(),
                "bench-scale",
            )
        }
        Ok(Mode::Bench {
            plan,
            runtimes,
            stores,
            quick,
            baseline,
        }) => bench(&plan, &runtimes, &stores, quick, baseline.as_deref()),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

// ------------------------------------------------------------------------------------------
// One configuration's processes.

/// A phase's server and, on Redis, its redis-server with the benchmark's connection to it.
struct Setup {
    server: ServerProcess,
    redis: Option<(Redis, Resp)>,
}

impl Setup {
    /// Starts `exe` (this binary, or the baseline's) as the server.
    fn start(rt: Rt, store: Store, plan: &Plan, exe: &std::path::Path) -> Result<Setup, String> {
        let redis = if store.redis() {
            let server = on_core_0(Redis::start)?.map_err(|e| format!("redis-server: {e}"))?;
            let conn = server
                .connect()
                .map_err(|e| format!("connecting to redis-server: {e}"))?;
            Some((server, conn))
        } else {
            None
        };
        let max = plan.max_sessions().to_string();
        let heartbeat = plan.heartbeat.as_millis().to_string();
        let mut args = vec![
            "--serve",
            rt.name(),
            "--max-sessions",
            &max,
            "--heartbeat-ms",
            &heartbeat,
        ];
        let url = redis.as_ref().map(|(r, _)| r.url());
        if let Some(url) = &url {
            args.extend(["--redis", url, "--instance", "scale1"]);
        }
        if store == Store::RedisSerial {
            args.extend(["--redis-in-flight", "1"]);
        }
        let server = ServerProcess::start(exe, &args, rt.name())?;
        Ok(Setup { server, redis })
    }

    fn sample(&mut self) -> Result<Sample, String> {
        let (store_bytes, store_cpu_ns) = match &mut self.redis {
            None => (0, 0),
            Some((server, conn)) => {
                let pid = server.pid().ok_or("redis-server is down")?;
                (used_memory(conn)?, cpu_ns(pid)?)
            }
        };
        Ok(Sample {
            at: Instant::now(),
            rss: self.server.rss_bytes()?,
            cpu_ns: cpu_ns(self.server.pid())?,
            store_bytes,
            store_cpu_ns,
        })
    }
}

/// Redis's `used_memory` (`INFO memory`), bytes.
fn used_memory(conn: &mut Resp) -> Result<u64, String> {
    let reply = conn
        .command(&["INFO", "memory"])
        .map_err(|e| format!("redis INFO: {e}"))?;
    let text = match &reply {
        RespValue::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        other => return Err(format!("redis INFO: {other:?}")),
    };
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "redis INFO: no used_memory".to_owned())
}

/// The processes' counters at one moment.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    rss: u64,
    cpu_ns: u64,
    store_bytes: u64,
    store_cpu_ns: u64,
}

impl Sample {
    /// `self - before`, per `n` events: (RSS bytes, CPU µs, store bytes, store CPU µs, s).
    fn per(&self, before: &Sample, n: usize) -> Delta {
        let n = n.max(1) as f64;
        Delta {
            rss: (self.rss as f64 - before.rss as f64) / n,
            cpu_us: self.cpu_ns.saturating_sub(before.cpu_ns) as f64 / 1e3 / n,
            store_bytes: (self.store_bytes as f64 - before.store_bytes as f64) / n,
            store_cpu_us: self.store_cpu_ns.saturating_sub(before.store_cpu_ns) as f64 / 1e3 / n,
            secs: self.at.duration_since(before.at).as_secs_f64(),
        }
    }
}

/// Growth between two samples per event.
#[derive(Debug, Clone, Copy, Default)]
struct Delta {
    rss: f64,
    cpu_us: f64,
    store_bytes: f64,
    store_cpu_us: f64,
    secs: f64,
}

// ------------------------------------------------------------------------------------------
// Phase 1: idle sessions.

#[derive(Debug, Clone)]
struct Span {
    from: usize,
    to: usize,
    per_session: Delta,
}

impl Span {
    fn rate(&self) -> f64 {
        (self.to - self.from) as f64 / self.per_session.secs.max(1e-9)
    }
}

async fn idle_sessions(setup: &mut Setup, plan: &Plan) -> Result<Vec<Span>, String> {
    let target = setup.server.target();
    let mut spans = Vec::new();
    let mut open = 0;
    let mut before = setup.sample()?;
    for &to in &plan.checkpoints {
        let n = to.saturating_sub(open);
        let opened = open_many(&target, n, OPEN_CONNECTIONS, false).await?;
        if opened.failures > 0 || opened.opened as usize != n {
            return Err(format!(
                "{} of {n} sessions failed to open: {}",
                opened.failures,
                opened.first_error.unwrap_or_default()
            ));
        }
        let after = setup.sample()?;
        spans.push(Span {
            from: open,
            to,
            per_session: after.per(&before, n),
        });
        open = to;
        before = after;
    }
    Ok(spans)
}

// ------------------------------------------------------------------------------------------
// Phase 2: GET streams.

#[derive(Debug, Clone, Default)]
struct Streams {
    streams: usize,
    /// Per stream, from opening the streams (over the sessions').
    opening: Delta,
    /// Heartbeats received in the window, over all streams.
    heartbeats: u64,
    /// The fewest any stream received in the window.
    fewest: u64,
    /// Over the window.
    window: Delta,
}

impl Streams {
    fn rounds(&self) -> f64 {
        self.heartbeats as f64 / self.streams.max(1) as f64
    }
}

/// Counts `needle` in a stream of chunks (occurrences may straddle chunks).
struct Counter {
    tail: Vec<u8>,
}

impl Counter {
    const NEEDLE: &'static [u8] = b": keepalive";

    fn feed(&mut self, chunk: &[u8]) -> u64 {
        self.tail.extend_from_slice(chunk);
        let n = self
            .tail
            .windows(Self::NEEDLE.len())
            .filter(|w| *w == Self::NEEDLE)
            .count() as u64;
        let keep = Self::NEEDLE.len() - 1;
        if self.tail.len() > keep {
            self.tail.drain(..self.tail.len() - keep);
        }
        n
    }
}

async fn get_streams(setup: &mut Setup, plan: &Plan) -> Result<Streams, String> {
    let target = setup.server.target();
    let n = plan.streams;
    let opened = open_many(&target, n, OPEN_CONNECTIONS, true).await?;
    if opened.ids.len() != n {
        return Err(format!(
            "{} of {n} sessions failed to open: {}",
            opened.failures,
            opened.first_error.unwrap_or_default()
        ));
    }
    let ids = Arc::new(opened.ids);
    let counts: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    // Why the first stream that ended did (none may end).
    let first_end: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let before = setup.sample()?;
    // Openers: CONNECT_IN_FLIGHT at once, each stream then read by a task of its own.
    let next = Arc::new(AtomicUsize::new(0));
    let mut openers = tokio::task::JoinSet::new();
    let mut readers = tokio::task::JoinSet::new();
    let (reader_tx, mut reader_rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..CONNECT_IN_FLIGHT.min(n) {
        let (target, ids, next, tx) =
            (target.clone(), ids.clone(), next.clone(), reader_tx.clone());
        openers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(id) = ids.get(i) else {
                    return Ok::<(), String>(());
                };
                let mut conn = Conn::open(&target).await?;
                let body = conn
                    .get_stream(id)
                    .await
                    .map_err(|e| format!("GET stream {i}: {e}"))?;
                let _ = tx.send((i, conn, body));
            }
        });
    }
    drop(reader_tx);
    let mut started = 0;
    loop {
        tokio::select! {
            got = reader_rx.recv() => {
                let Some((i, conn, mut body)) = got else { break };
                started += 1;
                let (counts, first_end) = (counts.clone(), first_end.clone());
                readers.spawn(async move {
                    let _conn: Conn = conn; // the connection lives as long as its stream
                    let mut counter = Counter { tail: Vec::new() };
                    let why = loop {
                        match body.frame().await {
                            Some(Ok(frame)) => {
                                if let Some(data) = frame.data_ref() {
                                    counts[i].fetch_add(counter.feed(data), Ordering::Relaxed);
                                }
                            }
                            Some(Err(e)) => break format!("stream {i}: {e}"),
                            None => break format!("stream {i} ended"),
                        }
                    };
                    if let Ok(mut first) = first_end.lock() {
                        first.get_or_insert(why);
                    }
                });
            }
            Some(done) = openers.join_next() => {
                done.map_err(|e| e.to_string())??;
            }
        }
    }
    while let Some(done) = openers.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    if started != n {
        return Err(format!("{started} of {n} GET streams opened"));
    }
    let opened_at = setup.sample()?;
    let opening = opened_at.per(&before, n);
    // Let a round pass, so every stream's heartbeat timer has fired once, then the window.
    tokio::time::sleep(plan.heartbeat).await;
    let total =
        |c: &[AtomicU64]| -> Vec<u64> { c.iter().map(|a| a.load(Ordering::Relaxed)).collect() };
    let c0 = total(&counts);
    let w0 = setup.sample()?;
    tokio::time::sleep(plan.heartbeat * plan.rounds).await;
    let w1 = setup.sample()?;
    let c1 = total(&counts);
    let got: Vec<u64> = c1.iter().zip(&c0).map(|(a, b)| a - b).collect();
    let heartbeats: u64 = got.iter().sum();
    let ended = match first_end.lock() {
        Ok(first) => first.clone(),
        Err(_) => Some("a stream reader panicked".into()),
    };
    if let Some(why) = ended {
        return Err(format!("a GET stream ended during the run: {why}"));
    }
    let fewest = got.iter().copied().min().unwrap_or(0);
    if fewest == 0 {
        return Err("a GET stream received no heartbeat in the window".into());
    }
    readers.abort_all();
    Ok(Streams {
        streams: n,
        opening,
        heartbeats,
        fewest,
        window: w1.per(&w0, 1),
    })
}

// ------------------------------------------------------------------------------------------
// Phase 3: streaming calls.

#[derive(Debug, Clone, Default)]
struct Calls {
    calls: u64,
    wrong: u64,
    /// Calls the server pushed back (503 with `Retry-After`) before taking them, each
    /// sent again after the wait (a call pushed back twice counts twice).
    pushbacks: u64,
    first_wrong: Option<String>,
    latencies_us: Vec<u64>,
    /// Per call, over the phase.
    per_call: Delta,
    /// Peak VmRSS growth per call in flight.
    peak_per_call: f64,
}

async fn streaming_calls(setup: &mut Setup, plan: &Plan) -> Result<Calls, String> {
    let target = setup.server.target();
    let in_flight = plan.call_sessions * plan.per_session;
    let opened = open_many(&target, plan.call_sessions, OPEN_CONNECTIONS, true).await?;
    if opened.ids.len() != plan.call_sessions {
        return Err(format!(
            "{} of {} sessions failed to open: {}",
            opened.failures,
            plan.call_sessions,
            opened.first_error.unwrap_or_default()
        ));
    }
    // One connection per call in flight, opened before the clock starts.
    let conns = open_connections(&target, in_flight).await?;
    let before = setup.sample()?;
    let next_id = Arc::new(AtomicU64::new(1));
    let mut workers = tokio::task::JoinSet::new();
    for (i, mut conn) in conns.into_iter().enumerate() {
        let session = opened.ids[i % plan.call_sessions].clone();
        let (next_id, rounds, steps, delay) =
            (next_id.clone(), plan.call_rounds, plan.steps, plan.delay_ms);
        workers.spawn(async move {
            let mut lat = Vec::with_capacity(rounds);
            let mut wrong = Vec::new();
            let mut pushed = 0u64;
            for _ in 0..rounds {
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                match call_stream(&mut conn, &session, id, steps, delay).await {
                    Ok(p) => {
                        lat.push(t.elapsed().as_micros() as u64);
                        pushed += u64::from(p);
                    }
                    Err(e) => wrong.push(e),
                }
            }
            (lat, wrong, pushed)
        });
    }
    let pid = setup.server.pid();
    let peak = Arc::new(AtomicU64::new(before.rss));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                if let Ok(rss) = rss_bytes(pid) {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(RSS_SAMPLE).await;
            }
        })
    };
    let mut calls = Calls::default();
    while let Some(done) = workers.join_next().await {
        let (lat, wrong, pushed) = done.map_err(|e| e.to_string())?;
        calls.calls += (lat.len() + wrong.len()) as u64;
        calls.pushbacks += pushed;
        calls.latencies_us.extend(lat);
        calls.wrong += wrong.len() as u64;
        if calls.first_wrong.is_none() {
            calls.first_wrong = wrong.into_iter().next();
        }
    }
    let after = setup.sample()?;
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    calls.per_call = after.per(&before, calls.calls as usize);
    calls.peak_per_call =
        peak.load(Ordering::Relaxed).saturating_sub(before.rss) as f64 / in_flight.max(1) as f64;
    Ok(calls)
}

/// `n` connections to `target`, [`CONNECT_IN_FLIGHT`] opened at once.
async fn open_connections(target: &Target, n: usize) -> Result<Vec<Conn>, String> {
    let left = Arc::new(AtomicUsize::new(n));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..CONNECT_IN_FLIGHT.min(n) {
        let (target, left) = (target.clone(), left.clone());
        set.spawn(async move {
            let mut got = Vec::new();
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                got.push(Conn::open(&target).await?);
            }
            Ok::<_, String>(got)
        });
    }
    let mut all = Vec::with_capacity(n);
    while let Some(got) = set.join_next().await {
        all.extend(got.map_err(|e| e.to_string())??);
    }
    Ok(all)
}

// ------------------------------------------------------------------------------------------
// The run and its tables.

struct Row {
    rt: Rt,
    store: Store,
    /// The baseline build's server (`--baseline`).
    base: bool,
    /// One per repetition, in order.
    idle: Vec<Result<Vec<Span>, String>>,
    /// Run in the first repetition only.
    streams: Result<Streams, String>,
    /// One per repetition, in order.
    calls: Vec<Result<Calls, String>>,
}

impl Row {
    /// The repetition the tables show: the idle phase's with the median sessions opened
    /// per second.
    fn idle_shown(&self) -> usize {
        shown(&self.idle, |sp| sp.last().map_or(0.0, Span::rate))
    }

    /// The streaming-call phase's with the median server CPU per call.
    fn calls_shown(&self) -> usize {
        shown(&self.calls, |c| c.per_call.cpu_us)
    }
}

/// Of one phase's repetitions, the one with the median `figure` (the lower middle of an
/// even count); a failure (other than "not run") before any, so that it is seen.
fn shown<T>(reps: &[Result<T, String>], figure: impl Fn(&T) -> f64) -> usize {
    if let Some(i) = reps
        .iter()
        .position(|r| r.as_ref().is_err_and(|e| e != NOT_RUN))
    {
        return i;
    }
    let mut ok: Vec<(f64, usize)> = reps
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().ok().map(|t| (figure(t), i)))
        .collect();
    ok.sort_by(|a, b| a.0.total_cmp(&b.0));
    ok.get(ok.len().saturating_sub(1) / 2)
        .map_or(0, |&(_, i)| i)
}

/// Runs `phase` (number `index` of [`PHASES`]) on a fresh setup of `rt` on `store`, unless
/// `--phases` left it out.
#[allow(clippy::too_many_arguments)]
fn phase<T>(
    runtime: &tokio::runtime::Runtime,
    rt: Rt,
    store: Store,
    plan: &Plan,
    index: usize,
    exe: &std::path::Path,
    label: &str,
    phase: impl AsyncFnOnce(&mut Setup, &Plan) -> Result<T, String>,
) -> Result<T, String> {
    if !plan.phases[index] {
        return Err(NOT_RUN.into());
    }
    let name = PHASES[index];
    eprintln!("bench-scale: {label} on {}: {name}", store.name());
    let mut setup = Setup::start(rt, store, plan, exe)?;
    let out = runtime.block_on(phase(&mut setup, plan));
    setup.server.stop();
    if let Err(e) = &out {
        eprintln!("bench-scale: {label} on {}: {name}: {e}", store.name());
    }
    out
}

fn bench(
    plan: &Plan,
    runtimes: &[Rt],
    stores: &[Store],
    quick: bool,
    baseline: Option<&std::path::Path>,
) -> ExitCode {
    if !pin_to(1) {
        eprintln!("bench-scale: could not pin the load generator to core 1");
    }
    let runtime = match mcp_bench::current_thread() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let current = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("bench-scale: this binary's path: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Each configuration on this build, then on the baseline's, one after the other, so that
    // a busy spell of the shared machine touches both alike.
    let mut builds = vec![(false, current.as_path())];
    builds.extend(baseline.map(|b| (true, b)));
    // Every configuration once per repetition, so that a busy spell lands in one
    // repetition of each rather than in every repetition of one.
    let mut rows: Vec<Row> = Vec::new();
    for repetition in 0..plan.repeats {
        let mut at = 0;
        for &rt in runtimes {
            for &store in stores {
                for &(base, exe) in &builds {
                    let mut l = row_label(rt, base);
                    if plan.repeats > 1 {
                        let _ = write!(l, " (repetition {} of {})", repetition + 1, plan.repeats);
                    }
                    let idle = phase(&runtime, rt, store, plan, IDLE, exe, &l, idle_sessions);
                    if repetition == 0 {
                        let streams =
                            phase(&runtime, rt, store, plan, STREAMS, exe, &l, get_streams);
                        rows.push(Row {
                            rt,
                            store,
                            base,
                            idle: Vec::new(),
                            streams,
                            calls: Vec::new(),
                        });
                    }
                    let calls = phase(&runtime, rt, store, plan, CALLS, exe, &l, streaming_calls);
                    let row = &mut rows[at];
                    row.idle.push(idle);
                    row.calls.push(calls);
                    at += 1;
                }
            }
        }
    }
    print!("{}", report(plan, &mut rows, quick));
    if !quick {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/scale.svg");
        match chart(&path, &mut rows) {
            Ok(()) => eprintln!("bench-scale: chart written to {}", path.display()),
            Err(e) => eprintln!("bench-scale: chart: {e}"),
        }
    }
    let failed_phase = |e: &String| e != NOT_RUN;
    let failed = rows.iter().any(|r| {
        r.idle
            .iter()
            .any(|i| i.as_ref().err().is_some_and(failed_phase))
            || r.streams.as_ref().err().is_some_and(failed_phase)
            || r.calls
                .iter()
                .any(|c| c.as_ref().map_or_else(failed_phase, |c| c.wrong > 0))
    });
    if failed {
        eprintln!("bench-scale: a phase failed or a reply was wrong (see above)");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A row's server: the runtime, `@base` for the baseline build's.
fn row_label(rt: Rt, base: bool) -> String {
    if base {
        format!("{}@base", rt.name())
    } else {
        rt.name().to_owned()
    }
}

/// The figures the goals and the chart compare, of one row (`None`: the phase did not run or
/// failed).
#[derive(Debug, Clone, Copy, Default)]
struct Key {
    /// Sessions opened per second (the last span of the idle phase).
    opens_per_s: Option<f64>,
    /// Server CPU per session opened (µs).
    cpu_per_open: Option<f64>,
    /// Server RSS per open GET stream (B), when every stream held.
    stream_bytes: Option<f64>,
    /// Server CPU per heartbeat (µs).
    cpu_per_heartbeat: Option<f64>,
    /// Whether every GET stream held its heartbeats (`None`: not run).
    streams_held: Option<bool>,
    /// Streaming calls per second.
    calls_per_s: Option<f64>,
    /// Server CPU per streaming call (µs).
    cpu_per_call: Option<f64>,
    /// Calls that failed.
    wrong: Option<u64>,
    /// Calls pushed back (and sent again).
    pushbacks: Option<u64>,
}

impl Key {
    /// The figures the tables show (the median repetitions').
    fn of(r: &Row) -> Key {
        Key::of_repetitions(r, r.idle_shown(), r.calls_shown())
    }

    /// The figures of the idle phase's repetition `idle` and the calls phase's `calls`.
    fn of_repetitions(r: &Row, idle: usize, calls: usize) -> Key {
        let mut k = Key::default();
        if let Some(Ok(sp)) = r.idle.get(idle)
            && let Some(l) = sp.last()
        {
            k.opens_per_s = Some(l.rate());
            k.cpu_per_open = Some(l.per_session.cpu_us);
        }
        match &r.streams {
            Ok(s) => {
                k.streams_held = Some(true);
                k.stream_bytes = Some(s.opening.rss);
                k.cpu_per_heartbeat = Some(s.window.cpu_us / s.heartbeats.max(1) as f64);
            }
            Err(e) if e != NOT_RUN => k.streams_held = Some(false),
            Err(_) => {}
        }
        if let Some(Ok(c)) = r.calls.get(calls) {
            k.calls_per_s = Some(c.calls as f64 / c.per_call.secs.max(1e-9));
            k.cpu_per_call = Some(c.per_call.cpu_us);
            k.wrong = Some(c.wrong);
            k.pushbacks = Some(c.pushbacks);
        }
        k
    }
}

/// `a / b`, when both are known and `b` is not 0.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The median of a figure's ratio over the repetitions, each repetition's Redis row against
/// its memory row (run one after the other), to two places; with the range when there is
/// more than one: `1.27 (1.21–1.35 over 3)`. "–" when none is known.
fn paired_median(ratios: impl Iterator<Item = Option<f64>>) -> String {
    let mut known: Vec<f64> = ratios.flatten().collect();
    known.sort_by(f64::total_cmp);
    match known.as_slice() {
        [] => "–".into(),
        [one] => format!("{one:.2}"),
        all => {
            let n = all.len();
            let median = if n % 2 == 1 {
                all[n / 2]
            } else {
                (all[n / 2 - 1] + all[n / 2]) / 2.0
            };
            format!("{median:.2} ({:.2}–{:.2} over {n})", all[0], all[n - 1])
        }
    }
}

/// The issue's goals for the Redis store, per runtime and build: each Redis figure beside
/// the memory store's of the same build and runtime, in the same run.
fn goals(out: &mut String, rows: &[Row]) {
    let _ = writeln!(
        out,
        "\n### Redis against memory (same build, same run; with repetitions, the median of each repetition's ratio)\n\n| server | GET streams held on Redis | streaming calls failed on Redis (pushed back) | server CPU/call Redis ÷ memory (goal ≤ 1.3) | sessions opened/s Redis ÷ memory (goal ≥ 0.5) |\n|---|---|---:|---:|---:|"
    );
    let mut seen = Vec::new();
    for r in rows {
        if seen.contains(&(r.rt, r.base)) {
            continue;
        }
        seen.push((r.rt, r.base));
        let find = |store: Store| {
            rows.iter()
                .find(|x| x.rt == r.rt && x.base == r.base && x.store == store)
        };
        let (Some(m), Some(d)) = (find(Store::Memory), find(Store::Redis)) else {
            continue;
        };
        let held = match Key::of(d).streams_held {
            Some(true) => "all",
            Some(false) => "**no**",
            None => "–",
        };
        // Every repetition's calls, not only the one the tables show.
        let calls: Vec<&Calls> = d.calls.iter().filter_map(|c| c.as_ref().ok()).collect();
        let failed = if calls.is_empty() {
            "–".into()
        } else {
            let wrong: u64 = calls.iter().map(|c| c.wrong).sum();
            let pushed: u64 = calls.iter().map(|c| c.pushbacks).sum();
            format!("{wrong} ({pushed})")
        };
        let reps = d.idle.len().min(m.idle.len());
        let each = |i: usize| (Key::of_repetitions(d, i, i), Key::of_repetitions(m, i, i));
        let _ = writeln!(
            out,
            "| {} | {held} | {failed} | {} | {} |",
            row_label(r.rt, r.base),
            paired_median(
                (0..reps)
                    .map(each)
                    .map(|(d, m)| ratio(d.cpu_per_call, m.cpu_per_call))
            ),
            paired_median(
                (0..reps)
                    .map(each)
                    .map(|(d, m)| ratio(d.opens_per_s, m.opens_per_s))
            ),
        );
    }
}

/// The scale figures as a picture: one panel per phase's main figures, a bar per server and
/// store (memory beside Redis).
fn chart(path: &std::path::Path, rows: &mut [Row]) -> Result<(), String> {
    let keyed: Vec<(String, Key)> = rows
        .iter()
        .map(|r| {
            let name = format!("{} {}", row_label(r.rt, r.base), r.store.name());
            (name, Key::of(r))
        })
        .collect();
    let panel = |title: &str, get: fn(&Key) -> Option<f64>| mcp_bench::chart::Panel {
        title: title.to_owned(),
        bars: keyed
            .iter()
            .map(|(n, k)| (n.clone(), get(k).unwrap_or(0.0)))
            .collect(),
    };
    mcp_bench::chart::write_svg(
        path,
        "bench-scale: one instance, memory vs Redis, per phase (0: failed or not run)",
        &[
            panel("sessions opened per second (higher is better)", |k| {
                k.opens_per_s
            }),
            panel("server KB per open GET stream", |k| {
                k.stream_bytes.map(|b| b / 1e3)
            }),
            panel("server CPU µs per heartbeat", |k| k.cpu_per_heartbeat),
            panel("streaming calls per second (higher is better)", |k| {
                k.calls_per_s
            }),
            panel("server CPU µs per streaming call", |k| k.cpu_per_call),
        ],
    )
}

/// A Redis column's figure (`decimals` places), or "–" on the memory store.
fn redis_only(store: Store, v: f64, decimals: usize) -> String {
    if store.redis() {
        format!("{v:.decimals$}")
    } else {
        "–".into()
    }
}

fn short(n: usize) -> String {
    if n >= 1_000 && n.is_multiple_of(1_000) {
        format!("{}k", n / 1_000)
    } else {
        n.to_string()
    }
}

fn report(plan: &Plan, rows: &mut [Row], quick: bool) -> String {
    let mut out = String::new();
    let name = |r: &Row| format!("{} | {}", row_label(r.rt, r.base), r.store.name());
    let _ = writeln!(
        out,
        "\n## bench-scale{}: one instance, load generator on the other core\n",
        if quick {
            " --quick (sizes are not the real ones)"
        } else {
            ""
        }
    );
    // The repeated phases show their median repetition.
    let median = if plan.repeats > 1 {
        format!(" (the median of {} repetitions)", plan.repeats)
    } else {
        String::new()
    };
    // Idle sessions.
    let spans: Vec<String> = plan
        .checkpoints
        .iter()
        .scan(0, |from, &to| {
            let s = format!("{}→{}", short(*from), short(to));
            *from = to;
            Some(s)
        })
        .collect();
    let _ = writeln!(
        out,
        "### {} idle sessions: server RSS growth per session (B), sessions opened per second{median}\n",
        short(*plan.checkpoints.last().unwrap_or(&0))
    );
    let _ = write!(out, "| server | store |");
    for s in &spans {
        let _ = write!(out, " B/session {s} |");
    }
    let _ = writeln!(
        out,
        " last ÷ middle | opens/s (last span) | server CPU µs/open | Redis B/session | Redis CPU µs/open |"
    );
    let _ = writeln!(
        out,
        "|---|---|{}---:|---:|---:|---:|---:|",
        "---:|".repeat(spans.len())
    );
    for r in rows.iter() {
        match &r.idle[r.idle_shown()] {
            Ok(sp) => {
                let _ = write!(out, "| {} |", name(r));
                for s in sp {
                    let _ = write!(out, " {:.0} |", s.per_session.rss);
                }
                let last = sp.last().cloned();
                let middle = sp.get(sp.len().saturating_sub(2)).cloned();
                let flat = match (&last, &middle) {
                    (Some(l), Some(m)) if m.per_session.rss > 0.0 => {
                        format!("{:.2}", l.per_session.rss / m.per_session.rss)
                    }
                    _ => "–".into(),
                };
                let l = last.unwrap_or(Span {
                    from: 0,
                    to: 0,
                    per_session: Delta::default(),
                });
                let _ = writeln!(
                    out,
                    " {flat} | {:.0} | {:.1} | {} | {} |",
                    l.rate(),
                    l.per_session.cpu_us,
                    redis_only(r.store, l.per_session.store_bytes, 0),
                    redis_only(r.store, l.per_session.store_cpu_us, 1),
                );
            }
            Err(e) => {
                let _ = writeln!(out, "| {} | failed: {e} |", name(r));
            }
        }
    }
    // GET streams.
    let _ = writeln!(
        out,
        "\n### {} open GET streams, a heartbeat every {} ms, a window of {} intervals\n",
        short(plan.streams),
        plan.heartbeat.as_millis(),
        plan.rounds
    );
    let _ = writeln!(
        out,
        "| server | store | B/stream | streams opened/s | heartbeats/stream (fewest) | server CPU µs per round | µs per heartbeat | Redis CPU µs per round |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|");
    for r in rows.iter() {
        match &r.streams {
            Ok(s) => {
                let rounds = s.rounds().max(1e-9);
                let _ = writeln!(
                    out,
                    "| {} | {:.0} | {:.0} | {:.1} ({}) | {:.0} | {:.2} | {} |",
                    name(r),
                    s.opening.rss,
                    s.streams as f64 / s.opening.secs.max(1e-9),
                    s.rounds(),
                    s.fewest,
                    s.window.cpu_us / rounds,
                    s.window.cpu_us / s.heartbeats.max(1) as f64,
                    redis_only(r.store, s.window.store_cpu_us / rounds, 0),
                );
            }
            Err(e) => {
                let _ = writeln!(out, "| {} | failed: {e} |", name(r));
            }
        }
    }
    // Streaming calls.
    let ideal = plan.steps * plan.delay_ms;
    let _ = writeln!(
        out,
        "\n### {} sessions × {} concurrent streaming calls ({} progress notifications {} ms apart: {ideal} ms asleep), {} rounds{median}\n",
        short(plan.call_sessions),
        plan.per_session,
        plan.steps,
        plan.delay_ms,
        plan.call_rounds
    );
    let _ = writeln!(
        out,
        "| server | store | calls | wrong | pushed back | calls/s | p50 ms | p99 ms | server CPU µs/call | peak B per call in flight | Redis CPU µs/call |"
    );
    let _ = writeln!(
        out,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows.iter_mut() {
        let label = name(r);
        let shown = r.calls_shown();
        match &mut r.calls[shown] {
            Ok(c) => {
                let p50 = percentile(&mut c.latencies_us, 0.5) / 1e3;
                let p99 = percentile(&mut c.latencies_us, 0.99) / 1e3;
                let _ = writeln!(
                    out,
                    "| {label} | {} | {} | {} | {:.0} | {p50:.0} | {p99:.0} | {:.1} | {:.0} | {} |",
                    c.calls,
                    c.wrong,
                    c.pushbacks,
                    c.calls as f64 / c.per_call.secs.max(1e-9),
                    c.per_call.cpu_us,
                    c.peak_per_call,
                    redis_only(r.store, c.per_call.store_cpu_us, 1),
                );
                if let Some(w) = &c.first_wrong {
                    let _ = writeln!(out, "\nfirst wrong reply ({label}): {w}");
                }
            }
            Err(e) => {
                let _ = writeln!(out, "| {label} | failed: {e} |");
            }
        }
    }
    goals(&mut out, rows);
    out
}

#[cfg(test)]
mod tests {
    use super::{Counter, NOT_RUN, paired_median, shown};

    /// The repetition shown is the median one; a failure shows before any figure.
    #[test]
    fn the_median_repetition_is_shown_and_a_failure_first() {
        let reps: Vec<Result<f64, String>> = vec![Ok(3.0), Ok(1.0), Ok(2.0)];
        assert_eq!(shown(&reps, |v| *v), 2);
        let even: Vec<Result<f64, String>> = vec![Ok(4.0), Ok(1.0), Ok(3.0), Ok(2.0)];
        assert_eq!(shown(&even, |v| *v), 3, "the lower middle");
        let failed = vec![Ok(1.0), Err("cut".to_owned()), Ok(2.0)];
        assert_eq!(shown(&failed, |v| *v), 1);
        let not_run: Vec<Result<f64, String>> = vec![Err(NOT_RUN.to_owned())];
        assert_eq!(shown(&not_run, |v| *v), 0);
    }

    #[test]
    fn ratios_are_the_median_of_the_repetitions_with_their_range() {
        let r = |v: &[Option<f64>]| paired_median(v.iter().copied());
        assert_eq!(r(&[]), "–");
        assert_eq!(r(&[None]), "–");
        assert_eq!(r(&[Some(1.234)]), "1.23");
        assert_eq!(
            r(&[Some(1.5), Some(1.1), None, Some(1.2)]),
            "1.20 (1.10–1.50 over 3)"
        );
        assert_eq!(r(&[Some(1.0), Some(2.0)]), "1.50 (1.00–2.00 over 2)");
    }

    /// Two heartbeats and some data, fed whole, byte by byte, and split at every offset:
    /// always counted twice (occurrences straddling chunks included).
    #[test]
    fn heartbeats_are_counted_however_the_stream_is_cut() {
        let stream = b"id: 1\ndata: {}\n\n: keepalive\n\n: keepalive\n\ndata: x\n\n";
        let count = |chunks: &[&[u8]]| {
            let mut c = Counter { tail: Vec::new() };
            chunks.iter().map(|ch| c.feed(ch)).sum::<u64>()
        };
        assert_eq!(count(&[stream]), 2);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(count(&bytes), 2);
        for at in 0..=stream.len() {
            let (a, b) = stream.split_at(at);
            assert_eq!(count(&[a, b]), 2, "split at {at}");
        }
    }
}
