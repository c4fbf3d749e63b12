//! Side-by-side benchmark of MCP clients against the floor server (`mcp_bench::floor`: it
//! parses each body and answers one SSE frame, so nearly all the CPU measured is the
//! client's):
//!
//! ```text
//! cargo run --release -p mcp-bench --bin bench-clients [-- --quick] [--clients tokio,tokio-own,smol,smol-idle4,rmcp,rmcp-pooled] [--reps N] [--heap-detail]
//! ```
//!
//! The floor runs in a child process (this binary re-executed with `--serve-floor`) pinned to
//! core 0; the clients run in this process, pinned to core 1, one after the other, each
//! phase repeated `--reps` times with the clients interleaved; medians are reported:
//!
//! 1. sequential: one client session, `calls` `tools/call echo` one after the other;
//! 2. in flight: one client session, `calls` calls from 64 concurrent tasks;
//! 3. connect: `connects` × (connect + initialize + one call + close), the median time to
//!    the first call's answer (which also waits for `notifications/initialized`'s);
//! 4. memory: `sessions` client sessions opened and held: the heap bytes they hold (a
//!    counting allocator: live bytes after minus before, per session); `--heap-detail`
//!    also prints them by allocation size class (what a session's bytes are made of).
//!
//! CPU per call is this process's on-CPU time (the sum over its threads of
//! `/proc/self/task/*/schedstat`) over the phase, divided by the calls; the floor's own CPU
//! per call is reported beside it (a client that opens connections it need not open costs
//! the server too). Every reply is checked (the echoed text); a wrong one fails the run.
//!
//! The clients: `tokio` (`mcp_tokio::Client`, hyper's pool, shared by the sessions made on
//! one thread; `tokio-own` with a pool per session, `HttpOptions::own_pool`, as before the
//! default shared it), `smol` (`mcp_smol::Client`,
//! async-h1 and its own pool; `smol-idle4` with at most 4 idle connections, as its pool was
//! before it sized itself to the requests in flight), `rmcp` (rmcp 3.11's streamable HTTP client with its defaults:
//! reqwest with pooling off, 16 concurrent POSTs at most) and `rmcp-pooled` (the same with a
//! pooling reqwest client and 64 concurrent POSTs).
#![allow(unsafe_code)] // The counting allocator below, in this binary only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use mcp_bench::load::median;
use mcp_bench::pin_to;
use mcp_bench::process::{ServerProcess, cpu_ns};
use serde_json::{Value, json};

// ------------------------------------------------------------------------------------------
// Heap accounting.

/// The system allocator, counting the bytes live at any time.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Live allocations and bytes by size class (class `k` holds sizes in `(2^(k-1), 2^k]`), for
/// `--heap-detail`: which sizes a client session holds.
static CLASS_COUNT: [AtomicIsize; 40] = [const { AtomicIsize::new(0) }; 40];
static CLASS_BYTES: [AtomicIsize; 40] = [const { AtomicIsize::new(0) }; 40];

fn class_of(size: usize) -> usize {
    (usize::BITS - size.saturating_sub(1).leading_zeros()).min(39) as usize
}

#[allow(clippy::cast_possible_wrap)]
fn count(size: usize, sign: isize) {
    let k = class_of(size);
    CLASS_COUNT[k].fetch_add(sign, Ordering::Relaxed);
    CLASS_BYTES[k].fetch_add(sign * size as isize, Ordering::Relaxed);
}

/// The per-class live counts and bytes now.
fn classes() -> Vec<(isize, isize)> {
    (0..40)
        .map(|k| {
            (
                CLASS_COUNT[k].load(Ordering::Relaxed),
                CLASS_BYTES[k].load(Ordering::Relaxed),
            )
        })
        .collect()
}

// SAFETY: every method forwards to `System` unchanged and only adds bookkeeping.
#[allow(clippy::cast_possible_wrap)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
            count(layout.size(), 1);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        count(layout.size(), -1);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `GlobalAlloc::realloc`, forwarded.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
            count(layout.size(), -1);
            count(new_size, 1);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live_bytes() -> isize {
    LIVE.load(Ordering::Relaxed)
}

// ------------------------------------------------------------------------------------------
// The clients under test.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientKind {
    Tokio,
    /// `tokio` sessions each with a pool of its own (`HttpOptions::own_pool`): the default
    /// before sessions shared their thread's, before/after in one run.
    TokioOwn,
    Smol,
    /// `smol` keeping at most 4 idle connections (the pool before it sized itself to the
    /// requests in flight): before/after in one run.
    SmolIdle4,
    Rmcp,
    RmcpPooled,
}

impl ClientKind {
    const ALL: [ClientKind; 6] = [
        ClientKind::Tokio,
        ClientKind::TokioOwn,
        ClientKind::Smol,
        ClientKind::SmolIdle4,
        ClientKind::Rmcp,
        ClientKind::RmcpPooled,
    ];

    fn name(self) -> &'static str {
        match self {
            ClientKind::Tokio => "tokio",
            ClientKind::TokioOwn => "tokio-own",
            ClientKind::Smol => "smol",
            ClientKind::SmolIdle4 => "smol-idle4",
            ClientKind::Rmcp => "rmcp",
            ClientKind::RmcpPooled => "rmcp-pooled",
        }
    }

    fn parse(name: &str) -> Option<ClientKind> {
        ClientKind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A connected client session of any kind; `call` is one checked `tools/call echo`.
enum Conn {
    Tokio(mcp_tokio::Client),
    Smol(mcp_smol::Client),
    Rmcp(rmcp::service::RunningService<rmcp::RoleClient, ()>),
}

/// A cloneable handle to make calls from many tasks.
#[derive(Clone)]
enum Caller {
    Ours(mcp_service::client::Client),
    Rmcp(rmcp::Peer<rmcp::RoleClient>),
}

fn text_of(result: &Value) -> Option<&str> {
    result.pointer("/content/0/text").and_then(Value::as_str)
}

impl Caller {
    async fn call(&self, n: u64) -> Result<(), String> {
        let text = format!("bench {n}");
        let result = match self {
            Caller::Ours(c) => {
                let r = c
                    .call_tool("echo", json!({"text": text}))
                    .await
                    .map_err(|e| format!("call: {e}"))?;
                if r.first_text() == Some(text.as_str()) {
                    return Ok(());
                }
                format!("{r:?}")
            }
            Caller::Rmcp(peer) => {
                let mut args = serde_json::Map::new();
                args.insert("text".into(), Value::String(text.clone()));
                let params = rmcp::model::CallToolRequestParams::new("echo").with_arguments(args);
                let r = peer
                    .call_tool(params)
                    .await
                    .map_err(|e| format!("call: {e}"))?;
                let v = serde_json::to_value(&r).map_err(|e| e.to_string())?;
                if text_of(&v) == Some(text.as_str()) {
                    return Ok(());
                }
                v.to_string()
            }
        };
        Err(format!("wrong reply to {text:?}: {result}"))
    }
}

impl Conn {
    async fn open(kind: ClientKind, url: &str) -> Result<Conn, String> {
        match kind {
            ClientKind::Tokio => mcp_tokio::Client::connect(url)
                .await
                .map(Conn::Tokio)
                .map_err(|e| e.to_string()),
            ClientKind::TokioOwn => mcp_tokio::Client::builder(url)
                .http(|h| h.own_pool(true))
                .connect()
                .await
                .map(Conn::Tokio)
                .map_err(|e| e.to_string()),
            ClientKind::Smol => mcp_smol::Client::connect(url)
                .await
                .map(Conn::Smol)
                .map_err(|e| e.to_string()),
            ClientKind::SmolIdle4 => mcp_smol::Client::builder(url)
                .http(|h| h.with_max_idle_connections(4))
                .connect()
                .await
                .map(Conn::Smol)
                .map_err(|e| e.to_string()),
            ClientKind::Rmcp | ClientKind::RmcpPooled => {
                use rmcp::ServiceExt as _;
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                let transport = if kind == ClientKind::Rmcp {
                    StreamableHttpClientTransport::from_uri(url.to_owned())
                } else {
                    StreamableHttpClientTransport::with_client(
                        reqwest::Client::new(),
                        StreamableHttpClientTransportConfig::with_uri(url.to_owned())
                            .max_concurrent_requests(64),
                    )
                };
                ().serve(transport)
                    .await
                    .map(Conn::Rmcp)
                    .map_err(|e| e.to_string())
            }
        }
    }

    fn caller(&self) -> Caller {
        match self {
            Conn::Tokio(c) => Caller::Ours(c.client().clone()),
            Conn::Smol(c) => Caller::Ours(c.client().clone()),
            Conn::Rmcp(c) => Caller::Rmcp(c.peer().clone()),
        }
    }

    async fn close(self) {
        match self {
            Conn::Tokio(c) => c.close().await,
            Conn::Smol(c) => c.close().await,
            Conn::Rmcp(c) => {
                let _ = c.cancel().await;
            }
        }
    }
}

// ------------------------------------------------------------------------------------------
// The phases, each run on the client's own runtime.

/// Runs `f` to completion on the runtime of `kind`: a tokio current-thread runtime, or smol.
fn on_runtime<T>(kind: ClientKind, f: impl Future<Output = T>) -> Result<T, String> {
    if matches!(kind, ClientKind::Smol | ClientKind::SmolIdle4) {
        return Ok(smol::block_on(f));
    }
    let rt = mcp_bench::current_thread()?;
    Ok(rt.block_on(f))
}

/// Spawns `f` on the runtime `block_on` is running (tokio's or smol's).
async fn spawn_all(
    kind: ClientKind,
    tasks: Vec<impl Future<Output = Result<(), String>> + Send + 'static>,
) -> Result<(), String> {
    if matches!(kind, ClientKind::Smol | ClientKind::SmolIdle4) {
        let handles: Vec<_> = tasks.into_iter().map(smol::spawn).collect();
        for h in handles {
            h.await?;
        }
    } else {
        let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
        for h in handles {
            h.await.map_err(|e| format!("task: {e}"))??;
        }
    }
    Ok(())
}

/// CPU per call (µs) of this process and of the server over `calls` calls, `in_flight` at a
/// time, on one client session.
fn calls_phase(
    kind: ClientKind,
    url: &str,
    server: u32,
    calls: u64,
    in_flight: u64,
) -> Result<(f64, f64), String> {
    on_runtime(kind, async {
        let conn = Conn::open(kind, url).await?;
        let caller = conn.caller();
        // Warm-up: connections, pools, allocator.
        for n in 0..in_flight.max(50) {
            caller.call(n).await?;
        }
        let (me0, srv0) = (cpu_ns(std::process::id())?, cpu_ns(server)?);
        let per_task = calls / in_flight;
        let tasks: Vec<_> = (0..in_flight)
            .map(|t| {
                let caller = caller.clone();
                async move {
                    for i in 0..per_task {
                        caller.call(t * per_task + i).await?;
                    }
                    Ok(())
                }
            })
            .collect();
        spawn_all(kind, tasks).await?;
        let (me1, srv1) = (cpu_ns(std::process::id())?, cpu_ns(server)?);
        conn.close().await;
        let done = (per_task * in_flight) as f64;
        Ok((
            (me1 - me0) as f64 / 1000.0 / done,
            srv1.saturating_sub(srv0) as f64 / 1000.0 / done,
        ))
    })?
}

/// The median time (ms) of one connect + initialize + first call, over `n` (each closed
/// afterwards). The first call counts the `notifications/initialized` round trip too:
/// `connect` may return before its answer, and a call waits for it.
fn connect_phase(kind: ClientKind, url: &str, n: usize) -> Result<f64, String> {
    on_runtime(kind, async {
        let mut times = Vec::with_capacity(n);
        for i in 0..n {
            let t0 = Instant::now();
            let conn = Conn::open(kind, url).await?;
            conn.caller().call(i as u64).await?;
            times.push(t0.elapsed().as_secs_f64() * 1000.0);
            conn.close().await;
        }
        Ok(median(times))
    })?
}

/// Heap bytes held per open client session, over `n` sessions held at once (each has made
/// one call, so its connection and buffers exist).
fn memory_phase(kind: ClientKind, url: &str, n: usize) -> Result<f64, String> {
    on_runtime(kind, async {
        let before = live_bytes();
        let classes_before = classes();
        let mut conns = Vec::with_capacity(n);
        for i in 0..n {
            let conn = Conn::open(kind, url).await?;
            conn.caller().call(i as u64).await?;
            conns.push(conn);
        }
        // Let the tasks settle (replies read, buffers released).
        std::thread::sleep(Duration::from_millis(200));
        let held = live_bytes() - before;
        if HEAP_DETAIL.load(Ordering::Relaxed) {
            heap_detail(kind, &classes_before, &classes(), n);
        }
        for conn in conns {
            conn.close().await;
        }
        #[allow(clippy::cast_precision_loss)]
        Ok(held as f64 / n as f64)
    })?
}

/// `--heap-detail`: print what a client session holds, by allocation size class.
static HEAP_DETAIL: AtomicBool = AtomicBool::new(false);

#[allow(clippy::cast_precision_loss)]
fn heap_detail(kind: ClientKind, before: &[(isize, isize)], after: &[(isize, isize)], n: usize) {
    let mut out = format!(
        "{}: heap held per session by allocation size (live allocations, bytes)\n",
        kind.name()
    );
    for (k, (b, a)) in before.iter().zip(after).enumerate() {
        let (count, bytes) = (a.0 - b.0, a.1 - b.1);
        if bytes.unsigned_abs() * 20 < n {
            continue;
        }
        let lo = if k == 0 { 0 } else { (1usize << (k - 1)) + 1 };
        let _ = writeln!(
            out,
            "  {lo:>7}..={:<7} {:>7.1} allocations {:>9.0} bytes",
            1usize << k,
            count as f64 / n as f64,
            bytes as f64 / n as f64
        );
    }
    eprint!("{out}");
}

// ------------------------------------------------------------------------------------------
// Arguments, the run and the report.

struct Plan {
    quick: bool,
    calls: u64,
    connects: usize,
    sessions: usize,
    reps: usize,
}

const USAGE: &str =
    "usage: bench-clients [--quick] [--clients tokio,tokio-own,smol,smol-idle4,rmcp,rmcp-pooled] [--reps N] [--heap-detail]
       bench-clients --serve-floor [--bind ADDR:PORT] [--core N]
  --quick    small counts (200 calls, 10 connects, 10 sessions, 1 repetition): a smoke test
  --clients  which clients to compare, in order (default: all six)
  --reps     repetitions, clients interleaved (medians are reported; default 5)
  --heap-detail  also print, per client, the heap a session holds by allocation size";

#[derive(Default, Clone, Copy)]
struct Figures {
    seq_cpu: f64,
    seq_server: f64,
    par_cpu: f64,
    par_server: f64,
    connect_ms: f64,
    bytes: f64,
}

fn run(kind: ClientKind, url: &str, server: u32, plan: &Plan) -> Result<Figures, String> {
    let (seq_cpu, seq_server) = calls_phase(kind, url, server, plan.calls, 1)?;
    let (par_cpu, par_server) = calls_phase(kind, url, server, plan.calls, 64)?;
    let connect_ms = connect_phase(kind, url, plan.connects)?;
    let bytes = memory_phase(kind, url, plan.sessions)?;
    eprintln!(
        "{}: sequential {seq_cpu:.1} µs/call (floor {seq_server:.1}), 64 in flight {par_cpu:.1} (floor {par_server:.1}), connect {connect_ms:.2} ms, {bytes:.0} bytes/session",
        kind.name()
    );
    Ok(Figures {
        seq_cpu,
        seq_server,
        par_cpu,
        par_server,
        connect_ms,
        bytes,
    })
}

fn table(plan: &Plan, results: &[(ClientKind, Vec<Figures>)]) -> String {
    let med = |runs: &[Figures], f: fn(&Figures) -> f64| median(runs.iter().map(f).collect());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bench-clients: {} calls sequential and 64 in flight, {} connects, {} sessions held; median of {} run(s), clients interleaved; the floor server on core 0, the clients on core 1\n",
        plan.calls, plan.connects, plan.sessions, plan.reps
    );
    out.push_str("| client | CPU µs/call sequential | floor µs/call | CPU µs/call, 64 in flight | floor µs/call | connect + initialize + first call (ms) | heap bytes per client session |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (k, runs) in results {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2} | {:.0} |",
            k.name(),
            med(runs, |f| f.seq_cpu),
            med(runs, |f| f.seq_server),
            med(runs, |f| f.par_cpu),
            med(runs, |f| f.par_server),
            med(runs, |f| f.connect_ms),
            med(runs, |f| f.bytes),
        );
    }
    let pooled = results
        .iter()
        .find(|(k, _)| *k == ClientKind::RmcpPooled)
        .map(|(_, r)| med(r, |f| f.par_cpu));
    for (k, runs) in results {
        let bytes = med(runs, |f| f.bytes);
        let par = med(runs, |f| f.par_cpu);
        let mut verdicts = Vec::new();
        if matches!(
            k,
            ClientKind::Tokio | ClientKind::TokioOwn | ClientKind::Smol
        ) {
            let met = if bytes <= 10_240.0 {
                "met"
            } else {
                "**missed**"
            };
            verdicts.push(format!("≤ 10 KB per session: {met}"));
            if let Some(p) = pooled {
                let (target, text) = match k {
                    ClientKind::Tokio | ClientKind::TokioOwn => {
                        (0.5, "≤ 0.5× rmcp-pooled at 64 in flight")
                    }
                    _ => (1.0, "≤ rmcp-pooled at 64 in flight"),
                };
                let ratio = par / p;
                let met = if ratio <= target { "met" } else { "**missed**" };
                verdicts.push(format!("{text}: {ratio:.2}×, {met}"));
            }
        }
        if !verdicts.is_empty() {
            let _ = writeln!(out, "\n{}: {}", k.name(), verdicts.join("; "));
        }
    }
    out
}

/// The chart: CPU per call (both loads) and heap per session, per client.
fn chart(path: &std::path::Path, results: &[(ClientKind, Vec<Figures>)]) -> Result<(), String> {
    let panel = |title: &str, get: fn(&Figures) -> f64| mcp_bench::chart::Panel {
        title: title.to_owned(),
        bars: results
            .iter()
            .map(|(k, runs)| (k.name().to_owned(), median(runs.iter().map(get).collect())))
            .collect(),
    };
    mcp_bench::chart::write_svg(
        path,
        "bench-clients: tools/call echo against the floor server (lower is better)",
        &[
            panel("client CPU per call, 64 in flight (µs)", |f| f.par_cpu),
            panel("client CPU per call, sequential (µs)", |f| f.seq_cpu),
            panel("heap bytes per client session", |f| f.bytes),
        ],
    )
}

fn serve_floor(bind: &str, core: usize) -> ExitCode {
    if !pin_to(core) {
        eprintln!("floor server: could not pin to core {core}");
    }
    let rt = match mcp_bench::current_thread() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let served = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(bind).await?;
        mcp_bench::floor::serve(listener).await
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floor server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let mut plan = Plan {
        quick: false,
        calls: 6_400,
        connects: 100,
        sessions: 200,
        reps: 5,
    };
    let mut clients = ClientKind::ALL.to_vec();
    let (mut serve, mut bind, mut core) = (false, "127.0.0.1:0".to_owned(), 0usize);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let parsed: Result<(), String> = (|| {
            match arg.as_str() {
                "--quick" => {
                    plan = Plan {
                        quick: true,
                        calls: 256,
                        connects: 10,
                        sessions: 10,
                        reps: 1,
                    };
                }
                "--reps" => {
                    let n = args.next().ok_or("--reps needs a number")?;
                    plan.reps = n
                        .parse::<usize>()
                        .map_err(|e| format!("--reps {n:?}: {e}"))?
                        .max(1);
                }
                "--clients" => {
                    let list = args.next().ok_or("--clients needs a list")?;
                    clients = list
                        .split(',')
                        .map(|n| ClientKind::parse(n).ok_or(format!("unknown client {n:?}")))
                        .collect::<Result<_, _>>()?;
                }
                "--heap-detail" => HEAP_DETAIL.store(true, Ordering::Relaxed),
                "--serve-floor" => serve = true,
                "--bind" => bind = args.next().ok_or("--bind needs an address")?,
                "--core" => {
                    let n = args.next().ok_or("--core needs a number")?;
                    core = n.parse().map_err(|e| format!("--core {n:?}: {e}"))?;
                }
                "-h" | "--help" => return Err(USAGE.to_owned()),
                other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
            }
            Ok(())
        })();
        if let Err(e) = parsed {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    }
    if serve {
        return serve_floor(&bind, core);
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("current_exe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let server = match ServerProcess::start(
        &exe,
        &["--serve-floor", "--bind", "127.0.0.1:0", "--core", "0"],
        "floor",
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bench-clients: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !pin_to(1) {
        eprintln!("bench-clients: could not pin the clients to core 1 (fewer cores?)");
    }
    let mut results: Vec<(ClientKind, Vec<Figures>)> =
        clients.iter().map(|&k| (k, Vec::new())).collect();
    for _ in 0..plan.reps {
        for (kind, runs) in &mut results {
            match run(*kind, &server.url, server.pid(), &plan) {
                Ok(f) => runs.push(f),
                Err(e) => {
                    eprintln!("bench-clients: {} failed: {e}", kind.name());
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    server.stop();
    println!("{}", table(&plan, &results));
    let path = mcp_bench::chart_path("clients.svg", plan.quick);
    match chart(&path, &results) {
        Ok(()) => println!("chart: {}", path.display()),
        Err(e) => {
            eprintln!("bench-clients: chart: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
