//! Scale-out benchmark: our servers (tokio and smol adapters) on one instance in memory, on
//! Redis, behind nginx, and three instances on one Redis behind nginx, in one interleaved run.
//!
//! ```text
//! cargo run --release -p mcp-bench --bin bench-cluster [-- --quick] [--reps N] [--runtimes tokio,smol]
//! ```
//!
//! For each runtime, four configurations, all started at the beginning and kept for the
//! whole run (each with its own redis-server, so that its counts are its own):
//!
//! 1. `memory`: one instance, no cluster, driven directly;
//! 2. `redis`: one instance on Redis (`redis_backend`, `ClusterConfig`), directly;
//! 3. `memory+nginx`: one instance in memory behind nginx (the hop's own cost);
//! 4. `3×redis+nginx`: three instances on one Redis behind nginx (round robin, not sticky:
//!    one client's requests, even on one connection, go to every instance in turn).
//!
//! The servers are this binary re-executed (`--serve tokio|smol --bind 127.0.0.1:0 --core 0
//! [--redis URL --instance NAME]`), serving the `echo` tool of `bench-servers` in the default
//! response mode (a JSON body for a tool call that sends nothing before its result: every
//! echo reply here must be `application/json`, or it counts as wrong). redis-server and nginx
//! (`mcp_tests::services`) are started from a thread pinned to core 0 and inherit that: the
//! whole server side shares core 0, the hyper load generator (`mcp_bench::client`) has core 1.
//!
//! Each repetition runs, for each configuration in turn (so the repetitions interleave):
//!
//! - **calls**: `sessions` sessions, as many workers (one connection each), `calls` echo
//!   calls in total: req/s, p50/p99, and CPU per call of the instances (summed), of nginx
//!   and of Redis (on-CPU time of their threads from `/proc/<pid>/task/*/schedstat`, exact
//!   to the nanosecond where `/proc/<pid>/stat` counts 10 ms ticks); then one session at
//!   concurrency 1: p50/p99. The sessions are warmed up once at the start, so in configuration 4 every
//!   instance holds every session: these are calls on **cached** sessions;
//! - **sessions**: `open` sessions opened (initialize, then notifications/initialized),
//!   **4 in flight** (4 connections, sequentially on each): sessions per second and CPU per
//!   session; then `counted` more, one at a time, to count Redis round trips per session;
//! - **first calls** (configuration 4 only): `first` sessions opened directly on instance A,
//!   then one echo call each directly on instance B, which has not seen them (B loads the
//!   record), then a second call each on B (cached): round trips and p50 of both.
//!
//! **Round trips** are counted by Redis itself: its slow log at a threshold of 0 µs logs
//! every command with the client that sent it, and a command a Lua script runs is logged with
//! the script's pseudo-client `?:0`. So *round trips* = commands the instances sent (each
//! store operation of the worker is one command, `GET` or `EVALSHA` of a script, and one
//! session's operations go one after the other's answer; the counted sessions are opened one
//! at a time, so commands sent = round trips) and *commands* = those plus what their
//! scripts ran (what `INFO commandstats` and `total_commands_processed` count, which is why
//! they are not used for round trips). Not counted: the benchmark's own `SLOWLOG`/`CONFIG`,
//! and the instances' liveness renewals (`SET <prefix>:inst:*`, every third of the liveness
//! TTL whatever the load: printed on stderr). The slow log is off while sessions are opened
//! against the clock (its bookkeeping costs Redis CPU per command).
//!
//! Figures are the medians of `--reps` repetitions (default 5). The tables give each figure
//! and its ratio to configuration 1 of the same runtime. `--quick` uses tiny sizes and one
//! repetition: a smoke test. The exit status is 1 if any reply was wrong or anything failed
//! (every child process is stopped first); no figure is ever asserted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use mcp_bench::client::{Conn, Session, Target, call_echo, open_session};
use mcp_bench::echo;
use mcp_bench::instance::{self, KEY_PREFIX, Rt, on_core_0};
use mcp_bench::load::{LoadRun, median, open_many, open_sessions, percentile};
use mcp_bench::pin_to;
use mcp_bench::process::{ServerProcess, cpu_ns};
use mcp_tests::services::{Nginx, Redis, Resp, RespValue};

/// Sessions opened concurrently in the sessions phase.
const OPEN_IN_FLIGHT: usize = 4;
/// The slow log's length: far more than any counted window logs (checked).
const SLOWLOG_LEN: usize = 1_000_000;

// ------------------------------------------------------------------------------------------
// What is measured.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Memory,
    Redis,
    MemoryNginx,
    RedisThreeNginx,
}

impl Layout {
    const ALL: [Layout; 4] = [
        Layout::Memory,
        Layout::Redis,
        Layout::MemoryNginx,
        Layout::RedisThreeNginx,
    ];

    fn name(self) -> &'static str {
        match self {
            Layout::Memory => "1 memory",
            Layout::Redis => "2 redis",
            Layout::MemoryNginx => "3 memory+nginx",
            Layout::RedisThreeNginx => "4 3×redis+nginx",
        }
    }

    fn instances(self) -> usize {
        match self {
            Layout::RedisThreeNginx => 3,
            _ => 1,
        }
    }

    fn redis(self) -> bool {
        matches!(self, Layout::Redis | Layout::RedisThreeNginx)
    }

    fn nginx(self) -> bool {
        matches!(self, Layout::MemoryNginx | Layout::RedisThreeNginx)
    }
}

#[derive(Debug, Clone)]
struct Plan {
    sessions: usize,
    calls: u64,
    warmup_calls: u64,
    latency_calls: u64,
    open: usize,
    counted: usize,
    first: usize,
    reps: usize,
}

impl Plan {
    fn full() -> Plan {
        Plan {
            // At most nginx's 32 cached upstream connections in flight.
            sessions: 32,
            calls: 20_000,
            warmup_calls: 3_000,
            latency_calls: 2_000,
            open: 3_000,
            counted: 100,
            first: 200,
            reps: 5,
        }
    }

    fn quick() -> Plan {
        Plan {
            sessions: 4,
            calls: 200,
            warmup_calls: 40,
            latency_calls: 50,
            open: 40,
            counted: 10,
            first: 10,
            reps: 1,
        }
    }
}

// ------------------------------------------------------------------------------------------
// Arguments.

const USAGE: &str = "usage: bench-cluster [--quick] [--reps N] [--runtimes tokio,smol]
       bench-cluster --serve tokio|smol [--bind ADDR:PORT] [--core N] [--redis URL --instance NAME]
  --quick     tiny sizes and 1 repetition: a smoke test (exit status 1 on any wrong reply)
  --reps      interleaved repetitions (medians are reported; default 5)
  --runtimes  which of our adapters to measure (default: tokio,smol)
  --serve     run one instance (what the benchmark starts in a child process); with --redis,
              as cluster instance NAME on that Redis";

enum Mode {
    Bench {
        plan: Plan,
        runtimes: Vec<Rt>,
    },
    Serve {
        rt: Rt,
        bind: String,
        core: usize,
        redis: Option<instance::RedisStore>,
    },
}

fn parse_args() -> Result<Mode, String> {
    let mut plan = Plan::full();
    let mut reps = None;
    let mut runtimes = Rt::ALL.to_vec();
    let mut serve = None;
    let mut bind = "127.0.0.1:0".to_owned();
    let mut core = 0;
    let mut redis = None;
    let mut instance = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => plan = Plan::quick(),
            "--reps" => {
                let n = args.next().ok_or("--reps needs a number")?;
                reps = Some(
                    n.parse::<usize>()
                        .map_err(|e| format!("--reps {n:?}: {e}"))?,
                );
            }
            "--runtimes" => {
                let list = args.next().ok_or("--runtimes needs a list")?;
                runtimes = list
                    .split(',')
                    .map(|n| Rt::parse(n).ok_or(format!("unknown runtime {n:?}")))
                    .collect::<Result<_, _>>()?;
            }
            "--serve" => {
                let n = args.next().ok_or("--serve needs a runtime")?;
                serve = Some(Rt::parse(&n).ok_or(format!("unknown runtime {n:?}"))?);
            }
            "--bind" => bind = args.next().ok_or("--bind needs an address")?,
            "--core" => {
                let n = args.next().ok_or("--core needs a number")?;
                core = n.parse().map_err(|e| format!("--core {n:?}: {e}"))?;
            }
            "--redis" => redis = Some(args.next().ok_or("--redis needs a URL")?),
            "--instance" => instance = Some(args.next().ok_or("--instance needs a name")?),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if let Some(rt) = serve {
        let redis =
            instance::store_args(redis, instance, None).map_err(|e| format!("{e}\n{USAGE}"))?;
        return Ok(Mode::Serve {
            rt,
            bind,
            core,
            redis,
        });
    }
    if let Some(reps) = reps {
        plan.reps = reps.max(1);
    }
    if runtimes.is_empty() {
        return Err(format!("--runtimes names no runtime\n{USAGE}"));
    }
    Ok(Mode::Bench { plan, runtimes })
}

fn main() -> ExitCode {
    match parse_args() {
        Ok(Mode::Serve {
            rt,
            bind,
            core,
            redis,
        }) => serve(rt, &bind, core, redis.as_ref()),
        Ok(Mode::Bench { plan, runtimes }) => bench(&plan, &runtimes),
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(2)
        }
    }
}

// ------------------------------------------------------------------------------------------
// One instance (a child process).

fn serve(rt: Rt, bind: &str, core: usize, redis: Option<&instance::RedisStore>) -> ExitCode {
    instance::serve(
        rt,
        bind,
        core,
        echo::server(),
        echo::config(),
        redis,
        "bench-cluster",
    )
}

// ------------------------------------------------------------------------------------------
// Redis: its CPU, and what its slow log says the instances sent.

/// What the instances made Redis do in a window.
#[derive(Debug, Default, Clone)]
struct StoreCount {
    /// Commands the instances sent (each one round trip), by name.
    sent: BTreeMap<String, u64>,
    /// Commands their scripts ran.
    scripted: u64,
    /// Liveness renewals (`SET <prefix>:inst:*`), left out of `sent`.
    beats: u64,
}

impl StoreCount {
    fn round_trips(&self) -> u64 {
        self.sent.values().sum()
    }

    fn commands(&self) -> u64 {
        self.round_trips() + self.scripted
    }

    fn describe(&self) -> String {
        let sent: Vec<String> = self.sent.iter().map(|(c, n)| format!("{c} {n}")).collect();
        format!(
            "sent [{}], {} run by scripts, {} liveness renewals",
            sent.join(", "),
            self.scripted,
            self.beats
        )
    }
}

/// A configuration's redis-server and the benchmark's own connection to it.
struct Store {
    conn: Resp,
    server: Redis,
}

impl Store {
    fn start() -> Result<Store, String> {
        let server = on_core_0(Redis::start)?.map_err(|e| format!("redis-server: {e}"))?;
        let mut conn = server
            .connect()
            .map_err(|e| format!("connecting to redis-server: {e}"))?;
        let len = SLOWLOG_LEN.to_string();
        for args in [
            ["CONFIG", "SET", "slowlog-max-len", len.as_str()],
            ["CONFIG", "SET", "slowlog-log-slower-than", "0"],
        ] {
            expect_ok(conn.command(&args), &args)?;
        }
        Ok(Store { conn, server })
    }

    fn pid(&self) -> Result<u32, String> {
        self.server
            .pid()
            .ok_or_else(|| "redis-server is down".into())
    }

    fn cmd(&mut self, args: &[&str]) -> Result<RespValue, String> {
        match self.conn.command(args) {
            Ok(RespValue::Error(e)) => Err(format!("redis {args:?}: {e}")),
            Ok(v) => Ok(v),
            Err(e) => Err(format!("redis {args:?}: {e}")),
        }
    }

    /// Logs every command from now on (`true`), or none.
    fn logging(&mut self, on: bool) -> Result<(), String> {
        let threshold = if on { "0" } else { "-1" };
        self.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", threshold])?;
        self.cmd(&["SLOWLOG", "RESET"]).map(drop)
    }

    /// Starts a counted window.
    fn reset(&mut self) -> Result<(), String> {
        self.cmd(&["SLOWLOG", "RESET"]).map(drop)
    }

    /// What was logged since [`reset`](Self::reset); starts the next window.
    fn count(&mut self) -> Result<StoreCount, String> {
        let RespValue::Array(Some(entries)) = self.cmd(&["SLOWLOG", "GET", "-1"])? else {
            return Err("SLOWLOG GET: not an array".into());
        };
        self.reset()?;
        if entries.len() >= SLOWLOG_LEN {
            return Err("the slow log overflowed: counts would be short".into());
        }
        let mut count = StoreCount::default();
        let beat = format!("{KEY_PREFIX}:inst:");
        for entry in &entries {
            // [id, time, µs, [args...], client address, client name]
            let RespValue::Array(Some(fields)) = entry else {
                return Err(format!("a slow log entry that is not an array: {entry:?}"));
            };
            let args: Vec<&str> = match fields.get(3) {
                Some(RespValue::Array(Some(args))) => {
                    args.iter().map(|a| a.as_text().unwrap_or("?")).collect()
                }
                _ => return Err(format!("a slow log entry without arguments: {entry:?}")),
            };
            let client = fields.get(4).and_then(RespValue::as_text).unwrap_or("");
            let name = args.first().copied().unwrap_or("").to_ascii_uppercase();
            if matches!(name.as_str(), "SLOWLOG" | "CONFIG") {
                continue; // ours
            }
            if client.starts_with('?') {
                count.scripted += 1;
            } else if name == "SET" && args.get(1).is_some_and(|k| k.starts_with(&beat)) {
                count.beats += 1;
            } else {
                *count.sent.entry(name).or_default() += 1;
            }
        }
        Ok(count)
    }
}

/// Nanoseconds as microseconds.
fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// µs per event of a CPU delta, or `None` for a process this configuration lacks.
fn per(ns: u64, n: u64, present: bool) -> Option<f64> {
    present.then(|| us(ns) / n.max(1) as f64)
}

fn expect_ok(reply: std::io::Result<RespValue>, args: &[&str]) -> Result<(), String> {
    match reply {
        Ok(RespValue::Simple(ok)) if ok == "OK" => Ok(()),
        other => Err(format!("redis {args:?}: {other:?}")),
    }
}

// ------------------------------------------------------------------------------------------
// One configuration, alive for the whole run.

/// On-CPU nanoseconds of a configuration's processes.
#[derive(Debug, Clone, Copy, Default)]
struct Cpu {
    servers: u64,
    nginx: u64,
    redis: u64,
}

impl Cpu {
    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            servers: self.servers.saturating_sub(before.servers),
            nginx: self.nginx.saturating_sub(before.nginx),
            redis: self.redis.saturating_sub(before.redis),
        }
    }

    fn all(self) -> u64 {
        self.servers + self.nginx + self.redis
    }
}

struct Setup {
    rt: Rt,
    layout: Layout,
    /// The load's sessions (warmed up) and the single session.
    sessions: Vec<Session>,
    single: Vec<Session>,
    next_id: Arc<AtomicU64>,
    /// nginx, or the one instance.
    target: Target,
    servers: Vec<ServerProcess>,
    nginx: Option<Nginx>,
    store: Option<Store>,
    errors: u64,
    first_error: Option<String>,
}

/// One repetition's figures of one configuration (`None`: not applicable).
#[derive(Debug, Default, Clone)]
struct Rep {
    server_cpu: f64,
    nginx_cpu: Option<f64>,
    redis_cpu: Option<f64>,
    all_cpu: f64,
    rps: f64,
    p50: f64,
    p99: f64,
    single_p50: f64,
    single_p99: f64,
    rt_per_call: Option<f64>,
    sessions_per_s: f64,
    server_cpu_per_session: f64,
    all_cpu_per_session: f64,
    rt_per_session: Option<f64>,
    cmds_per_session: Option<f64>,
    first_rt: Option<f64>,
    first_cmds: Option<f64>,
    first_p50: Option<f64>,
    cached_rt: Option<f64>,
    cached_p50: Option<f64>,
}

impl Setup {
    fn label(&self) -> String {
        format!("{} {}", self.rt.name(), self.layout.name())
    }

    async fn start(rt: Rt, layout: Layout, plan: &Plan) -> Result<Setup, String> {
        let store = if layout.redis() {
            Some(Store::start()?)
        } else {
            None
        };
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut servers = Vec::new();
        for i in 0..layout.instances() {
            let mut args = vec![
                "--serve".to_owned(),
                rt.name().to_owned(),
                "--bind".to_owned(),
                "127.0.0.1:0".to_owned(),
                "--core".to_owned(),
                "0".to_owned(),
            ];
            if let Some(store) = &store {
                args.extend([
                    "--redis".to_owned(),
                    store.server.url(),
                    "--instance".to_owned(),
                    format!("{}{}", &rt.name()[..1], i + 1),
                ]);
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            servers.push(ServerProcess::start(&exe, &args, rt.name())?);
        }
        let direct = servers[0].target();
        let nginx = if layout.nginx() {
            let upstreams = servers
                .iter()
                .map(ServerProcess::addr)
                .collect::<Result<Vec<_>, _>>()?;
            Some(
                on_core_0(move || Nginx::round_robin(&upstreams))?
                    .map_err(|e| format!("nginx: {e}"))?,
            )
        } else {
            None
        };
        let target = match &nginx {
            Some(lb) => direct.via(&lb.addr().to_string()),
            None => direct,
        };
        let mut setup = Setup {
            rt,
            layout,
            sessions: Vec::new(),
            single: Vec::new(),
            next_id: Arc::new(AtomicU64::new(1)),
            target,
            servers,
            nginx,
            store,
            errors: 0,
            first_error: None,
        };
        let pids: Vec<String> = setup.servers.iter().map(|s| s.pid().to_string()).collect();
        eprintln!(
            "{}: instances {} (pids {}){}{}",
            setup.label(),
            setup
                .servers
                .iter()
                .map(|s| s.url.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            pids.join(" "),
            setup
                .nginx
                .as_ref()
                .map(|n| format!(", nginx {} (pid {})", n.url(), n.pid()))
                .unwrap_or_default(),
            setup
                .store
                .as_ref()
                .map(|s| format!(
                    ", {} (pid {})",
                    s.server.url(),
                    s.server.pid().unwrap_or_default()
                ))
                .unwrap_or_default(),
        );
        setup.sessions = open_sessions(&setup.target, plan.sessions).await?;
        setup.single = open_sessions(&setup.target, 1).await?;
        for s in setup.sessions.iter_mut().chain(setup.single.iter_mut()) {
            s.json_only = true;
        }
        // Warm-up (not measured): connections, allocator, caches; in configuration 4 every
        // instance loads every session here.
        let sessions = std::mem::take(&mut setup.sessions);
        let (run, back) =
            mcp_bench::load::load(sessions, plan.warmup_calls, &setup.next_id).await?;
        setup.sessions = back;
        setup.note(&run);
        let single = std::mem::take(&mut setup.single);
        let (run, back) =
            mcp_bench::load::load(single, plan.latency_calls / 4 + 1, &setup.next_id).await?;
        setup.single = back;
        setup.note(&run);
        Ok(setup)
    }

    fn note(&mut self, run: &LoadRun) {
        self.wrong(run.errors, run.first_error.as_ref());
    }

    fn wrong(&mut self, n: u64, first: Option<&String>) {
        self.errors += n;
        if self.first_error.is_none() {
            self.first_error = first.cloned();
        }
    }

    fn cpu(&self) -> Result<Cpu, String> {
        let mut cpu = Cpu::default();
        for s in &self.servers {
            cpu.servers += cpu_ns(s.pid())?;
        }
        if let Some(n) = &self.nginx {
            cpu.nginx = cpu_ns(n.pid())?;
        }
        if let Some(s) = &self.store {
            cpu.redis = cpu_ns(s.pid()?)?;
        }
        Ok(cpu)
    }

    fn reset_count(&mut self) -> Result<(), String> {
        match &mut self.store {
            Some(s) => s.reset(),
            None => Ok(()),
        }
    }

    fn count(&mut self, what: &str) -> Result<Option<StoreCount>, String> {
        let Some(store) = &mut self.store else {
            return Ok(None);
        };
        let count = store.count()?;
        eprintln!("  {} {what}: {}", self.label(), count.describe());
        Ok(Some(count))
    }

    async fn rep(&mut self, plan: &Plan, rep: usize) -> Result<Rep, String> {
        let mut out = Rep::default();
        let (has_nginx, has_redis) = (self.nginx.is_some(), self.store.is_some());

        // Calls on cached sessions.
        self.reset_count()?;
        let cpu0 = self.cpu()?;
        let sessions = std::mem::take(&mut self.sessions);
        let (mut run, back) = mcp_bench::load::load(sessions, plan.calls, &self.next_id).await?;
        let cpu = self.cpu()?.since(cpu0);
        self.sessions = back;
        self.note(&run);
        let calls = run.calls;
        out.server_cpu = us(cpu.servers) / calls.max(1) as f64;
        out.nginx_cpu = per(cpu.nginx, calls, has_nginx);
        out.redis_cpu = per(cpu.redis, calls, has_redis);
        out.all_cpu = us(cpu.all()) / calls.max(1) as f64;
        out.rps = run.rps();
        out.p50 = run.percentile(0.5);
        out.p99 = run.percentile(0.99);
        let count = self.count("calls")?;
        out.rt_per_call = count.map(|c| c.round_trips() as f64 / calls.max(1) as f64);

        let single = std::mem::take(&mut self.single);
        let (mut lat, back) =
            mcp_bench::load::load(single, plan.latency_calls, &self.next_id).await?;
        self.single = back;
        self.note(&lat);
        out.single_p50 = lat.percentile(0.5);
        out.single_p99 = lat.percentile(0.99);

        // Sessions opened against the clock (the slow log off), then counted.
        if let Some(s) = &mut self.store {
            s.logging(false)?;
        }
        let cpu0 = self.cpu()?;
        let opened = open_many(&self.target, plan.open, OPEN_IN_FLIGHT, false).await?;
        let cpu = self.cpu()?.since(cpu0);
        if let Some(s) = &mut self.store {
            s.logging(true)?;
        }
        self.wrong(opened.failures, opened.first_error.as_ref());
        out.sessions_per_s = opened.opened as f64 / opened.elapsed.as_secs_f64();
        out.server_cpu_per_session = us(cpu.servers) / opened.opened.max(1) as f64;
        out.all_cpu_per_session = us(cpu.all()) / opened.opened.max(1) as f64;
        self.reset_count()?;
        let counted = open_many(&self.target, plan.counted, 1, false).await?;
        self.wrong(counted.failures, counted.first_error.as_ref());
        if let Some(c) = self.count("sessions opened")? {
            let n = counted.opened.max(1) as f64;
            out.rt_per_session = Some(c.round_trips() as f64 / n);
            out.cmds_per_session = Some(c.commands() as f64 / n);
        }

        if self.servers.len() > 1 {
            self.first_calls(plan, rep, &mut out).await?;
        }

        eprintln!(
            "{} rep {}: {:.0} req/s, p50 {:.0} µs, p99 {:.0} µs, CPU/call {:.1} µs instances + {:.1} nginx + {:.1} Redis; {:.0} sessions/s",
            self.label(),
            rep + 1,
            out.rps,
            out.p50,
            out.p99,
            out.server_cpu,
            out.nginx_cpu.unwrap_or(0.0),
            out.redis_cpu.unwrap_or(0.0),
            out.sessions_per_s,
        );
        Ok(out)
    }

    /// Sessions opened on instance A, then called on instance B (directly, not through
    /// nginx): B's first call loads the record; its second finds it cached.
    async fn first_calls(&mut self, plan: &Plan, rep: usize, out: &mut Rep) -> Result<(), String> {
        let n = self.servers.len();
        let a = self.servers[rep % n].target();
        let b = self.servers[(rep + 1) % n].target();
        let mut ids = Vec::new();
        let mut conn = None;
        for _ in 0..plan.first {
            match open_session(&a, conn.take()).await {
                Ok(s) => {
                    ids.push(s.id);
                    conn = Some(s.conn);
                }
                Err(e) => self.wrong(1, Some(&e)),
            }
        }
        let mut on_b = Session {
            conn: Conn::open(&b).await?,
            id: String::new(),
            json_only: true,
        };
        let calls = ids.len().max(1) as f64;
        self.reset_count()?;
        let (mut lat, wrong) = calls_on(&mut on_b, &ids, &self.next_id).await;
        self.wrong(wrong.len() as u64, wrong.first());
        if let Some(c) = self.count("first calls on another instance")? {
            out.first_rt = Some(c.round_trips() as f64 / calls);
            out.first_cmds = Some(c.commands() as f64 / calls);
        }
        out.first_p50 = Some(percentile(&mut lat, 0.5));
        let (mut lat, wrong) = calls_on(&mut on_b, &ids, &self.next_id).await;
        self.wrong(wrong.len() as u64, wrong.first());
        if let Some(c) = self.count("second calls there")? {
            out.cached_rt = Some(c.round_trips() as f64 / calls);
        }
        out.cached_p50 = Some(percentile(&mut lat, 0.5));
        Ok(())
    }

    /// Stops the instances in order (stdin closed); nginx and Redis are killed when the
    /// setup is dropped.
    fn stop(mut self) {
        self.sessions.clear();
        self.single.clear();
        for s in self.servers.drain(..) {
            s.stop();
        }
    }
}

/// One echo call on `session` for each session id in `ids`, in turn: the latencies of the
/// right replies, and the wrong ones.
async fn calls_on(
    session: &mut Session,
    ids: &[String],
    next_id: &AtomicU64,
) -> (Vec<u64>, Vec<String>) {
    let mut lat = Vec::new();
    let mut wrong = Vec::new();
    for id in ids {
        session.id.clone_from(id);
        let call = next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let t = Instant::now();
        match call_echo(session, call).await {
            Ok(()) => lat.push(t.elapsed().as_micros() as u64),
            Err(e) => wrong.push(e),
        }
    }
    (lat, wrong)
}

// ------------------------------------------------------------------------------------------
// The report.

/// The medians of a configuration's repetitions.
fn medians(reps: &[Rep]) -> Rep {
    let m = |f: fn(&Rep) -> f64| median(reps.iter().map(f).collect());
    let o = |f: fn(&Rep) -> Option<f64>| {
        let v: Vec<f64> = reps.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| median(v))
    };
    Rep {
        server_cpu: m(|r| r.server_cpu),
        nginx_cpu: o(|r| r.nginx_cpu),
        redis_cpu: o(|r| r.redis_cpu),
        all_cpu: m(|r| r.all_cpu),
        rps: m(|r| r.rps),
        p50: m(|r| r.p50),
        p99: m(|r| r.p99),
        single_p50: m(|r| r.single_p50),
        single_p99: m(|r| r.single_p99),
        rt_per_call: o(|r| r.rt_per_call),
        sessions_per_s: m(|r| r.sessions_per_s),
        server_cpu_per_session: m(|r| r.server_cpu_per_session),
        all_cpu_per_session: m(|r| r.all_cpu_per_session),
        rt_per_session: o(|r| r.rt_per_session),
        cmds_per_session: o(|r| r.cmds_per_session),
        first_rt: o(|r| r.first_rt),
        first_cmds: o(|r| r.first_cmds),
        first_p50: o(|r| r.first_p50),
        cached_rt: o(|r| r.cached_rt),
        cached_p50: o(|r| r.cached_p50),
    }
}

fn num(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), num)
}

/// `v (r×)`: `v` and its ratio to the baseline's `b`.
fn with_ratio(v: f64, b: f64) -> String {
    if b > 0.0 && v.is_finite() {
        format!("{} ({:.2}×)", num(v), v / b)
    } else {
        num(v)
    }
}

/// Round trips, with the commands scripts ran when there were any: `2 (9 commands)`.
fn trips(rt: Option<f64>, cmds: Option<f64>) -> String {
    match (rt, cmds) {
        (Some(r), Some(c)) if c > r => format!("{} ({} commands)", num(r), num(c)),
        (r, _) => opt(r),
    }
}

struct Row<'a> {
    rt: Rt,
    layout: Layout,
    fig: &'a Rep,
    base: &'a Rep,
    errors: u64,
}

fn tables(plan: &Plan, rows: &[Row<'_>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bench-cluster: {} sessions × {} workers × {} calls, 1 session × {} calls, {} sessions opened ({OPEN_IN_FLIGHT} in flight), {} counted, {} first calls; median of {} interleaved run(s); the server side (instances, nginx, Redis) on core 0, the load on core 1; ratios to configuration 1 of the same runtime\n",
        plan.sessions,
        plan.sessions,
        plan.calls,
        plan.latency_calls,
        plan.open,
        plan.counted,
        plan.first,
        plan.reps
    );
    let _ = writeln!(
        out,
        "Calls (`tools/call echo`, JSON replies, cached sessions)\n\n| runtime | configuration | CPU/call: instances (µs) | nginx (µs) | Redis (µs) | all (µs) | req/s | p50 (µs) | p99 (µs) | 1-session p50 (µs) | 1-session p99 (µs) | Redis round trips/call |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let (f, b) = (r.fig, r.base);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.rt.name(),
            r.layout.name(),
            with_ratio(f.server_cpu, b.server_cpu),
            opt(f.nginx_cpu),
            opt(f.redis_cpu),
            with_ratio(f.all_cpu, b.all_cpu),
            with_ratio(f.rps, b.rps),
            with_ratio(f.p50, b.p50),
            with_ratio(f.p99, b.p99),
            with_ratio(f.single_p50, b.single_p50),
            with_ratio(f.single_p99, b.single_p99),
            opt(f.rt_per_call),
        );
    }
    let _ = writeln!(
        out,
        "\nSessions (initialize + notifications/initialized) and first calls on an instance that has not seen the session (configuration 4: opened on A, called on B, directly)\n\n| runtime | configuration | sessions/s | CPU/session: instances (µs) | all (µs) | Redis round trips/session | first call: round trips | first call p50 (µs) | second call: round trips | second call p50 (µs) | wrong replies |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in rows {
        let (f, b) = (r.fig, r.base);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.rt.name(),
            r.layout.name(),
            with_ratio(f.sessions_per_s, b.sessions_per_s),
            with_ratio(f.server_cpu_per_session, b.server_cpu_per_session),
            with_ratio(f.all_cpu_per_session, b.all_cpu_per_session),
            trips(f.rt_per_session, f.cmds_per_session),
            trips(f.first_rt, f.first_cmds),
            opt(f.first_p50),
            opt(f.cached_rt),
            opt(f.cached_p50),
            r.errors,
        );
    }
    // The issue's goal on round trips (counts, not timings).
    let _ = writeln!(out);
    for rt in Rt::ALL {
        let mine: Vec<&Row<'_>> = rows
            .iter()
            .filter(|r| r.rt == rt && r.layout.redis())
            .collect();
        if mine.is_empty() {
            continue;
        }
        let cached = mine
            .iter()
            .filter_map(|r| r.fig.rt_per_call)
            .chain(mine.iter().filter_map(|r| r.fig.cached_rt))
            .fold(0.0, f64::max);
        let first = mine
            .iter()
            .filter_map(|r| r.fig.first_rt)
            .fold(0.0, f64::max);
        let verdict = |met: bool| if met { "met" } else { "**missed**" };
        let _ = writeln!(
            out,
            "{}: goal \"no Redis round trip for a call on a cached session\": {} (at most {} per call); \"at most one on the first call on an instance without the session\": {} (at most {})",
            rt.name(),
            verdict(cached <= 0.0),
            num(cached),
            verdict(first <= 1.0),
            num(first),
        );
    }
    out
}

// ------------------------------------------------------------------------------------------
// The run.

fn bench(plan: &Plan, runtimes: &[Rt]) -> ExitCode {
    if !pin_to(1) {
        eprintln!("bench-cluster: could not pin the load generator to core 1 (fewer cores?)");
    }
    let runtime = match mcp_bench::current_thread() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut setups = Vec::new();
    let result = runtime.block_on(run(plan, runtimes, &mut setups));
    // Every child process goes, whatever happened.
    let errors: Vec<(String, u64, Option<String>)> = setups
        .iter()
        .map(|s| (s.label(), s.errors, s.first_error.clone()))
        .collect();
    for s in setups.drain(..) {
        s.stop();
    }
    drop(runtime);
    let table = match result {
        Ok(table) => table,
        Err(e) => {
            eprintln!("bench-cluster failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{table}");
    let mut failed = false;
    for (label, n, first) in errors {
        if n > 0 {
            failed = true;
            println!(
                "{label}: {n} wrong replies (RUN INVALID); first: {}",
                first.as_deref().unwrap_or("?")
            );
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

async fn run(plan: &Plan, runtimes: &[Rt], setups: &mut Vec<Setup>) -> Result<String, String> {
    for &rt in runtimes {
        for layout in Layout::ALL {
            let setup = Setup::start(rt, layout, plan)
                .await
                .map_err(|e| format!("{} {}: {e}", rt.name(), layout.name()))?;
            setups.push(setup);
        }
    }
    let mut reps: Vec<Vec<Rep>> = vec![Vec::new(); setups.len()];
    for rep in 0..plan.reps {
        for (i, setup) in setups.iter_mut().enumerate() {
            let figures = setup
                .rep(plan, rep)
                .await
                .map_err(|e| format!("{}: {e}", setup.label()))?;
            reps[i].push(figures);
        }
    }
    let figures: Vec<Rep> = reps.iter().map(|r| medians(r)).collect();
    let rows: Vec<Row<'_>> = setups
        .iter()
        .zip(&figures)
        .map(|(s, fig)| {
            let base = setups
                .iter()
                .zip(&figures)
                .find(|(b, _)| b.rt == s.rt && b.layout == Layout::Memory)
                .map_or(fig, |(_, f)| f);
            Row {
                rt: s.rt,
                layout: s.layout,
                fig,
                base,
                errors: s.errors,
            }
        })
        .collect();
    Ok(tables(plan, &rows))
}
