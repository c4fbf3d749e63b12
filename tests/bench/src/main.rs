//! Side-by-side benchmark of our servers (tokio and smol adapters) and rmcp's streamable HTTP
//! server.
//!
//! ```text
//! cargo run --release -p mcp-bench --bin bench-servers [-- --quick] [--servers ours,smol,rmcp] [--reps N] [--protocols h1,h2] [--clients]
//! ```
//!
//! Each server runs in a child process (this binary re-executed with `--serve NAME --bind
//! 127.0.0.1:0`, printing its URL) pinned to core 0, serving the same `echo(text) -> text`
//! tool with `TCP_NODELAY` on, in its default response mode (ours: JSON, rmcp: SSE). The load
//! generator, pinned to core 1, drives each server in turn with the same raw HTTP/1.1
//! keep-alive client (hyper), the same JSON-RPC bodies and `Accept: application/json,
//! text/event-stream`, and checks every reply is the right echo result:
//!
//! 1. load: `sessions` initialized sessions, as many concurrent workers (worker `i` uses
//!    session `i` on its own connection), `calls` `tools/call echo` in total: req/s, p50/p99
//!    latency, and server CPU per call (the sum of its threads' `/proc/<pid>/task/*/schedstat` over the phase);
//! 2. latency: 1 session at concurrency 1: p50/p99;
//! 3. idle: `idle` sessions opened (initialize + notifications/initialized) and left idle:
//!    the server's VmRSS delta (`/proc/<pid>/status`) per session.
//!
//! Phases 1-2 are repeated `--reps` times, interleaved: every server is started and warmed
//! up first, then each repetition runs every server in turn, so that a busy spell of the
//! machine touches all of them alike. The median of each figure is reported; the CPU ratio
//! to the floor is the median of each repetition's own ratio. The
//! table at the end has one row per metric, one column per server, the ratio of each of ours
//! to the floor (a server that parses each body and answers one SSE frame, keeping nothing:
//! `mcp_bench::floor`) and to rmcp, and whether each target is met (CPU per call ≤ 0.5× rmcp
//! for tokio, ≤ 0.6× for smol; ≤ 1 KB per idle session; single-session p50 ≤ rmcp; below the
//! table, CPU per call ≤ 1.25× the floor for tokio, ≤ 2× for smol). The exit status is 1 if any reply was
//! wrong.
//!
//! With `--protocols h1,h2` (the default of `--quick`; `h1` alone otherwise), the same
//! phases run a second time with the load generator speaking HTTP/2 with prior knowledge
//! (h2c, RFC 9113 section 3.3): each session on its own HTTP/2 connection (so the same
//! 50 connections with one stream in flight each as over HTTP/1.1: the two tables differ by
//! the protocol alone), against the servers that speak it (the floor then served by hyper's
//! `http2` server, ours through hyper-util's auto builder as always, rmcp's service on
//! hyper's `http2` server; smol's async-h1 speaks HTTP/1.1 only), in a table of its own
//! whose floor is the HTTP/2 floor.
//!
//! The server list is data ([`ServerKind::ALL`]): another server is one variant away.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use mcp_bench::client::{Session, Target};
use mcp_bench::echo;
use mcp_bench::load::{LoadRun, median, open_many, open_sessions};
use mcp_bench::pin_to;
use mcp_bench::process::ServerProcess;

// ------------------------------------------------------------------------------------------
// The servers under test.

/// A server the benchmark knows how to start. Add a variant (and its arms) for another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerKind {
    /// The floor: hyper 1 + tokio parsing each body and answering one SSE frame, keeping and
    /// checking nothing (`mcp_bench::floor`), the practical lower bound.
    Floor,
    /// `mcp_tokio::serve` on `mcp_service::Server`.
    Ours,
    /// `mcp_smol::serve` (smol + async-h1) on the same `Server`.
    Smol,
    /// rmcp's `StreamableHttpService` on hyper `http1`.
    Rmcp,
    /// `ours` as built by another checkout (`--baseline PATH`: its `bench-servers` binary).
    OursBase,
    /// `smol` as built by another checkout.
    SmolBase,
}

/// The protocol the load generator speaks (`--protocols`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// HTTP/1.1 keep-alive, one connection per session.
    Http1,
    /// HTTP/2 with prior knowledge (h2c), one connection per session.
    Http2,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "h1",
            Protocol::Http2 => "h2",
        }
    }

    fn parse(name: &str) -> Option<Protocol> {
        [Protocol::Http1, Protocol::Http2]
            .into_iter()
            .find(|p| p.name() == name)
    }

    fn title(self) -> &'static str {
        match self {
            Protocol::Http1 => "HTTP/1.1",
            Protocol::Http2 => "HTTP/2 (h2c, prior knowledge)",
        }
    }
}

/// The `bench-servers` binary of the baseline build (`--baseline`).
static BASELINE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

impl ServerKind {
    const ALL: [ServerKind; 4] = [
        ServerKind::Floor,
        ServerKind::Ours,
        ServerKind::Smol,
        ServerKind::Rmcp,
    ];
    const KNOWN: [ServerKind; 6] = [
        ServerKind::Floor,
        ServerKind::Ours,
        ServerKind::Smol,
        ServerKind::Rmcp,
        ServerKind::OursBase,
        ServerKind::SmolBase,
    ];

    fn name(self) -> &'static str {
        match self {
            ServerKind::Floor => "floor",
            ServerKind::Ours => "ours",
            ServerKind::Smol => "smol",
            ServerKind::Rmcp => "rmcp",
            ServerKind::OursBase => "ours@base",
            ServerKind::SmolBase => "smol@base",
        }
    }

    /// The issue's CPU-per-call target for this server, as a fraction of rmcp's.
    fn cpu_target(self) -> f64 {
        match self {
            ServerKind::Smol | ServerKind::SmolBase => 0.6,
            ServerKind::Ours | ServerKind::OursBase | ServerKind::Rmcp | ServerKind::Floor => 0.5,
        }
    }

    /// The CPU-per-call target as a multiple of the floor's (performance round 2).
    fn floor_target(self) -> f64 {
        match self {
            ServerKind::Smol | ServerKind::SmolBase => 2.0,
            _ => 1.25,
        }
    }

    fn parse(name: &str) -> Option<ServerKind> {
        ServerKind::KNOWN.into_iter().find(|k| k.name() == name)
    }

    /// Whether it speaks `protocol` (smol's async-h1 is an HTTP/1.1 server only).
    fn speaks(self, protocol: Protocol) -> bool {
        match self {
            ServerKind::Smol | ServerKind::SmolBase => protocol == Protocol::Http1,
            _ => true,
        }
    }

    /// What this server is compared with as "before": the baseline build of the same one.
    fn base(self) -> Option<ServerKind> {
        match self {
            ServerKind::Ours => Some(ServerKind::OursBase),
            ServerKind::Smol => Some(ServerKind::SmolBase),
            _ => None,
        }
    }

    /// Serves until stdin closes (the parent ended or dropped it); the floor and rmcp with
    /// hyper's HTTP/2 server when `http2` (ours speaks both, as it always does).
    async fn serve(self, listener: tokio::net::TcpListener, http2: bool) -> std::io::Result<()> {
        match self {
            ServerKind::Floor => mcp_bench::floor::serve_as(listener, http2).await,
            ServerKind::Ours => {
                echo::serve_tokio(listener, echo::server(), echo::config(), Default::default())
                    .await
            }
            // Served by its own runtime (see `main`), never through a tokio listener.
            ServerKind::Smol => Err(std::io::Error::other("the smol server runs on smol")),
            ServerKind::Rmcp => rmcp_server::serve(listener, http2).await,
            ServerKind::OursBase | ServerKind::SmolBase => Err(std::io::Error::other(
                "a baseline server runs in the baseline binary",
            )),
        }
    }
}

mod rmcp_server {
    use std::sync::Arc;

    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::service::TowerToHyperService;
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use rmcp::{ErrorData, RoleServer, ServerHandler};
    use serde_json::json;

    /// The same `echo` tool, by hand (no macros): `echo(text) -> text content`.
    #[derive(Clone)]
    struct Echo {
        tool: Arc<Tool>,
    }

    impl ServerHandler for Echo {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn list_tools(
            &self,
            _request: Option<PaginatedRequestParams>,
            _context: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            Ok(ListToolsResult::with_all_items(vec![(*self.tool).clone()]))
        }

        async fn call_tool(
            &self,
            request: CallToolRequestParams,
            _context: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            if request.name != "echo" {
                return Err(ErrorData::invalid_params("unknown tool", None));
            }
            let text = request
                .arguments
                .as_ref()
                .and_then(|a| a.get("text"))
                .and_then(|t| t.as_str())
                .unwrap_or_default()
                .to_owned();
            Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
        }
    }

    /// Serves on hyper's `http1` server, or its `http2` one (prior knowledge) when `http2`.
    pub(crate) async fn serve(
        listener: tokio::net::TcpListener,
        http2: bool,
    ) -> std::io::Result<()> {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to return"}},
            "required": ["text"],
        });
        let serde_json::Value::Object(schema) = schema else {
            unreachable!("a JSON object literal")
        };
        let echo = Echo {
            tool: Arc::new(Tool::new("echo", "Returns its text", schema)),
        };
        let service = StreamableHttpService::new(
            move || Ok(echo.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        println!("bench server on http://{}/mcp", listener.local_addr()?);
        let accept = async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let svc = TowerToHyperService::new(service.clone());
                tokio::spawn(async move {
                    let _ = if http2 {
                        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(tcp), svc)
                            .await
                    } else {
                        hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tcp), svc)
                            .await
                    };
                });
            }
        };
        tokio::select! {
            () = accept => {}
            () = mcp_bench::echo::wait_for_stdin_eof() => {}
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------
// Arguments.

#[derive(Debug, Clone)]
struct Plan {
    quick: bool,
    sessions: usize,
    calls: u64,
    warmup_calls: u64,
    latency_calls: u64,
    idle: usize,
    reps: usize,
    /// The protocols, one table each, in order.
    protocols: Vec<Protocol>,
}

impl Plan {
    fn full() -> Plan {
        Plan {
            quick: false,
            sessions: 50,
            calls: 20_000,
            warmup_calls: 2_000,
            latency_calls: 2_000,
            idle: 10_000,
            reps: 3,
            protocols: vec![Protocol::Http1],
        }
    }

    fn quick() -> Plan {
        Plan {
            quick: true,
            sessions: 5,
            calls: 500,
            warmup_calls: 50,
            latency_calls: 100,
            idle: 200,
            reps: 1,
            protocols: vec![Protocol::Http1, Protocol::Http2],
        }
    }
}

const USAGE: &str =
    "usage: bench-servers [--quick] [--servers ours,smol,rmcp] [--reps N] [--calls N] [--protocols h1,h2] [--clients] [--baseline PATH]
       bench-servers --serve NAME [--bind ADDR:PORT] [--core N] [--http2]
  --quick    small counts (5 sessions, 500 calls, 200 idle sessions, 1 repetition, h1 and h2): a smoke test
  --protocols which protocols the load speaks, one table each (h1: HTTP/1.1; h2: HTTP/2 with prior
             knowledge, one connection per session, smol left out; default h1, --quick h1,h2)
  --servers  which servers to compare, in order (default: floor,ours,smol,rmcp)
  --reps     repetitions of the load and latency phases (medians are reported; default 3)
  --calls    calls in each load phase (default 20000; --quick 500)
  --clients  then the client table (bench-clients, built by the same cargo), same size and reps
  --baseline the bench-servers binary of another build: its servers are ours@base and smol@base
             (e.g. --servers ours,ours@base,smol,smol@base), compared before/after in one run
  --serve    run one server (what the benchmark starts in a child process); --http2: the floor
             and rmcp on hyper's HTTP/2 server (ours speaks both always)";

enum Mode {
    Bench {
        plan: Plan,
        servers: Vec<ServerKind>,
        /// `--clients`: then the client table (`bench-clients`), with these arguments.
        clients: Option<Vec<String>>,
    },
    Serve {
        kind: ServerKind,
        bind: String,
        core: usize,
        http2: bool,
    },
}

fn parse_args() -> Result<Mode, String> {
    let mut plan = Plan::full();
    let mut reps = None;
    let mut calls = None;
    let mut clients = None;
    let mut servers = ServerKind::ALL.to_vec();
    let mut serve = None;
    let mut bind = "127.0.0.1:0".to_owned();
    let mut core = 0;
    let mut http2 = false;
    let mut protocols = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => plan = Plan::quick(),
            "--clients" => clients = Some(Vec::new()),
            "--reps" => {
                let n = args.next().ok_or("--reps needs a number")?;
                reps = Some(
                    n.parse::<usize>()
                        .map_err(|e| format!("--reps {n:?}: {e}"))?,
                );
            }
            "--calls" => {
                let n = args.next().ok_or("--calls needs a number")?;
                calls = Some(
                    n.parse::<u64>()
                        .map_err(|e| format!("--calls {n:?}: {e}"))?,
                );
            }
            "--servers" => {
                let list = args.next().ok_or("--servers needs a list")?;
                servers = list
                    .split(',')
                    .map(|n| ServerKind::parse(n).ok_or(format!("unknown server {n:?}")))
                    .collect::<Result<_, _>>()?;
            }
            "--serve" => {
                let n = args.next().ok_or("--serve needs a server name")?;
                serve = Some(ServerKind::parse(&n).ok_or(format!("unknown server {n:?}"))?);
            }
            "--bind" => bind = args.next().ok_or("--bind needs an address")?,
            "--http2" => http2 = true,
            "--protocols" => {
                let list = args.next().ok_or("--protocols needs a list")?;
                protocols = Some(
                    list.split(',')
                        .map(|n| Protocol::parse(n).ok_or(format!("unknown protocol {n:?}")))
                        .collect::<Result<Vec<_>, _>>()?,
                );
            }
            "--baseline" => {
                let path = args.next().ok_or("--baseline needs a path")?;
                let _ = BASELINE.set(path.into());
            }
            "--core" => {
                let n = args.next().ok_or("--core needs a number")?;
                core = n.parse().map_err(|e| format!("--core {n:?}: {e}"))?;
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if let Some(kind) = serve {
        return Ok(Mode::Serve {
            kind,
            bind,
            core,
            http2,
        });
    }
    if let Some(protocols) = protocols {
        if protocols.is_empty() {
            return Err(format!("--protocols names no protocol\n{USAGE}"));
        }
        plan.protocols = protocols;
    }
    if let Some(reps) = reps {
        plan.reps = reps.max(1);
    }
    if let Some(calls) = calls {
        plan.calls = calls.max(1);
    }
    if servers.is_empty() {
        return Err(format!("--servers names no server\n{USAGE}"));
    }
    if BASELINE.get().is_none()
        && servers
            .iter()
            .any(|k| matches!(k, ServerKind::OursBase | ServerKind::SmolBase))
    {
        return Err(format!("a baseline server needs --baseline\n{USAGE}"));
    }
    // The client table with the same size and repetitions.
    let clients = clients.map(|_: Vec<String>| {
        let mut args = Vec::new();
        if plan.quick {
            args.push("--quick".to_owned());
        }
        if let Some(reps) = reps {
            args.extend(["--reps".to_owned(), reps.to_string()]);
        }
        args
    });
    Ok(Mode::Bench {
        plan,
        servers,
        clients,
    })
}

fn main() -> ExitCode {
    let mode = match parse_args() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match mode {
        Mode::Serve {
            kind,
            bind,
            core,
            http2,
        } => {
            if !pin_to(core) {
                eprintln!("bench server: could not pin to core {core}");
            }
            let result = if kind == ServerKind::Smol {
                // smol's executor threads start after the pinning and inherit it.
                echo::serve_smol_parked(&bind, echo::server(), echo::config(), Default::default())
            } else {
                let rt = match mcp_bench::current_thread() {
                    Ok(rt) => rt,
                    Err(e) => {
                        eprintln!("{e}");
                        return ExitCode::FAILURE;
                    }
                };
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::bind(&bind).await?;
                    kind.serve(listener, http2).await
                })
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("bench server {}: {e}", kind.name());
                    ExitCode::FAILURE
                }
            }
        }
        Mode::Bench {
            plan,
            servers,
            clients,
        } => {
            let servers = bench(&plan, &servers);
            match clients {
                Some(args) if servers == ExitCode::SUCCESS => bench_clients(&args),
                _ => servers,
            }
        }
    }
}

/// The client table: `bench-clients` (built first, by the cargo that runs this, so that one
/// command gives both tables), with `args`.
fn bench_clients(args: &[String]) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name("bench-clients"),
        Err(e) => {
            eprintln!("bench-servers: current_exe: {e}");
            return ExitCode::FAILURE;
        }
    };
    // `cargo run` names itself in `CARGO`; run from a built binary, the sibling must exist.
    if let Ok(cargo) = std::env::var("CARGO") {
        let release = exe.parent().is_some_and(|d| d.ends_with("release"));
        let mut build = std::process::Command::new(cargo);
        build.args(["build", "-q", "-p", "mcp-bench", "--bin", "bench-clients"]);
        if release {
            build.arg("--release");
        }
        match build.status() {
            Ok(s) if s.success() => {}
            other => {
                eprintln!("bench-servers: building bench-clients: {other:?}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!();
    match std::process::Command::new(&exe).args(args).status() {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench-servers: {}: {e}", exe.display());
            ExitCode::FAILURE
        }
    }
}

// ------------------------------------------------------------------------------------------
// The child processes.

/// Starts server `kind` in a child process (this binary, or the baseline's) on core 0,
/// ready for `protocol`.
fn start_server(kind: ServerKind, protocol: Protocol) -> Result<ServerProcess, String> {
    let (exe, name) = match kind {
        ServerKind::OursBase | ServerKind::SmolBase => {
            let exe = BASELINE.get().ok_or("no --baseline binary")?.clone();
            (
                exe,
                if kind == ServerKind::OursBase {
                    "ours"
                } else {
                    "smol"
                },
            )
        }
        _ => (
            std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?,
            kind.name(),
        ),
    };
    let mut args = vec!["--serve", name, "--bind", "127.0.0.1:0", "--core", "0"];
    // Ours (and a baseline build of it) speaks both without being told.
    if protocol == Protocol::Http2 && matches!(kind, ServerKind::Floor | ServerKind::Rmcp) {
        args.push("--http2");
    }
    ServerProcess::start(&exe, &args, kind.name())
}

// ------------------------------------------------------------------------------------------
// The phases.

/// `calls` echo calls over `sessions` (one worker each), measuring the server's CPU.
async fn load(
    server: &ServerProcess,
    sessions: Vec<Session>,
    calls: u64,
    next_id: &Arc<AtomicU64>,
) -> Result<(LoadRun, Vec<Session>), String> {
    let cpu0 = server.cpu_ns()?;
    let (mut run, back) = mcp_bench::load::load(sessions, calls, next_id).await?;
    run.cpu_ns = server.cpu_ns()?.saturating_sub(cpu0);
    Ok((run, back))
}

/// Opens `n` sessions over a few connections (closed afterwards) and leaves them idle;
/// returns the RSS delta per session and the number of failures.
async fn idle(server: &ServerProcess, target: &Target, n: usize) -> Result<(f64, u64), String> {
    const CONNECTIONS: usize = 16;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss0 = server.rss_bytes()?;
    let failures = open_many(target, n, CONNECTIONS, false).await?.failures;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss1 = server.rss_bytes()?;
    Ok((rss1.saturating_sub(rss0) as f64 / n as f64, failures))
}

#[derive(Debug, Default)]
struct Figures {
    rps: f64,
    /// CPU per call of each repetition, in order (paired with the floor's of the same one).
    cpu_reps: Vec<f64>,
    load_p50: f64,
    load_p99: f64,
    cpu_us: f64,
    single_p50: f64,
    single_p99: f64,
    idle_bytes: f64,
    errors: u64,
    first_error: Option<String>,
}

/// One server under test through the interleaved phases: its process, sessions and samples.
struct Running {
    kind: ServerKind,
    server: ServerProcess,
    target: Target,
    next_id: Arc<AtomicU64>,
    sessions: Vec<Session>,
    single: Vec<Session>,
    fig: Figures,
    samples: [Vec<f64>; 5],
}

impl Running {
    /// Starts `kind`, opens its sessions and warms it up (connections, allocator, caches).
    async fn start(kind: ServerKind, plan: &Plan, protocol: Protocol) -> Result<Running, String> {
        let server = start_server(kind, protocol)?;
        eprintln!(
            "{} ({}): pid {} at {}",
            kind.name(),
            protocol.name(),
            server.pid(),
            server.url
        );
        let target = server.target().with_http2(protocol == Protocol::Http2);
        let next_id = Arc::new(AtomicU64::new(1));
        let sessions = open_sessions(&target, plan.sessions).await?;
        let single = open_sessions(&target, 1).await?;
        let mut running = Running {
            kind,
            server,
            target,
            next_id,
            sessions: Vec::new(),
            single,
            fig: Figures::default(),
            samples: Default::default(),
        };
        let (run, back) = load(
            &running.server,
            sessions,
            plan.warmup_calls,
            &running.next_id,
        )
        .await?;
        running.note(&run);
        running.sessions = back;
        Ok(running)
    }

    fn note(&mut self, run: &LoadRun) {
        self.fig.errors += run.errors;
        if self.fig.first_error.is_none() {
            self.fig.first_error.clone_from(&run.first_error);
        }
    }

    /// One repetition of the load and latency phases.
    async fn rep(&mut self, plan: &Plan, rep: usize) -> Result<(), String> {
        let sessions = std::mem::take(&mut self.sessions);
        let (mut run, back) = load(&self.server, sessions, plan.calls, &self.next_id).await?;
        self.sessions = back;
        self.note(&run);
        let single = std::mem::take(&mut self.single);
        let (mut lat, back) = load(&self.server, single, plan.latency_calls, &self.next_id).await?;
        self.single = back;
        self.note(&lat);
        let [rps, p50, p99, s50, s99] = &mut self.samples;
        rps.push(run.rps());
        p50.push(run.percentile(0.5));
        p99.push(run.percentile(0.99));
        self.fig.cpu_reps.push(run.cpu_us_per_call());
        s50.push(lat.percentile(0.5));
        s99.push(lat.percentile(0.99));
        eprintln!(
            "{} rep {}: {:.0} req/s, p50 {:.0} µs, p99 {:.0} µs, {:.1} µs CPU/call; single p50 {:.0} µs",
            self.kind.name(),
            rep + 1,
            run.rps(),
            run.percentile(0.5),
            run.percentile(0.99),
            run.cpu_us_per_call(),
            lat.percentile(0.5),
        );
        Ok(())
    }

    /// The medians, then the idle phase; stops the server.
    async fn finish(mut self, plan: &Plan) -> Result<Figures, String> {
        let [rps, p50, p99, s50, s99] = std::mem::take(&mut self.samples);
        self.fig.rps = median(rps);
        self.fig.load_p50 = median(p50);
        self.fig.load_p99 = median(p99);
        self.fig.cpu_us = median(self.fig.cpu_reps.clone());
        self.fig.single_p50 = median(s50);
        self.fig.single_p99 = median(s99);
        drop(std::mem::take(&mut self.sessions));
        drop(std::mem::take(&mut self.single));
        let (bytes, failures) = idle(&self.server, &self.target, plan.idle).await?;
        self.fig.idle_bytes = bytes;
        self.fig.errors += failures;
        if failures > 0 && self.fig.first_error.is_none() {
            self.fig.first_error = Some(format!("{failures} idle sessions failed to open"));
        }
        eprintln!(
            "{}: {:.0} bytes per idle session",
            self.kind.name(),
            self.fig.idle_bytes
        );
        self.server.stop();
        Ok(self.fig)
    }
}

/// Every server through the phases, interleaved: all started and warmed up, then each
/// repetition runs every server in turn (a busy spell of the machine touches all of them
/// alike), then each one's idle phase.
async fn measure_all(
    plan: &Plan,
    kinds: &[ServerKind],
    protocol: Protocol,
) -> Result<Vec<(ServerKind, Figures)>, String> {
    let mut running = Vec::new();
    for &kind in kinds {
        running.push(
            Running::start(kind, plan, protocol)
                .await
                .map_err(|e| format!("{}: {e}", kind.name()))?,
        );
    }
    for rep in 0..plan.reps {
        for r in &mut running {
            let name = r.kind.name();
            r.rep(plan, rep).await.map_err(|e| format!("{name}: {e}"))?;
        }
    }
    let mut results = Vec::new();
    for r in running {
        let kind = r.kind;
        results.push((
            kind,
            r.finish(plan)
                .await
                .map_err(|e| format!("{}: {e}", kind.name()))?,
        ));
    }
    Ok(results)
}

// ------------------------------------------------------------------------------------------
// The report.

/// Whether `ours` meets a target given the reference (`rmcp`) figures.
/// Whether server `kind` with figures `.1` meets a target given rmcp's figures `.2`.
type Verdict = fn(ServerKind, &Figures, &Figures) -> bool;

struct Metric {
    name: &'static str,
    unit: &'static str,
    get: fn(&Figures) -> f64,
    /// The target, as text (`{f}` stands for the server's CPU factor), and whether a server
    /// meets it given `rmcp`'s figures.
    target: Option<(&'static str, Verdict)>,
    /// Whether a ratio to the floor means anything (the floor keeps no session: not for
    /// idle bytes).
    vs_floor: bool,
}

const METRICS: &[Metric] = &[
    Metric {
        name: "load throughput",
        unit: "req/s",
        get: |f| f.rps,
        target: None,
        vs_floor: true,
    },
    Metric {
        name: "load p50 latency",
        unit: "µs",
        get: |f| f.load_p50,
        target: None,
        vs_floor: true,
    },
    Metric {
        name: "load p99 latency",
        unit: "µs",
        get: |f| f.load_p99,
        target: None,
        vs_floor: true,
    },
    Metric {
        name: "server CPU per call",
        unit: "µs",
        get: |f| f.cpu_us,
        target: Some(("≤ {f}× rmcp", |k, o, r| {
            o.cpu_us <= k.cpu_target() * r.cpu_us
        })),
        vs_floor: true,
    },
    Metric {
        name: "single-session p50 latency",
        unit: "µs",
        get: |f| f.single_p50,
        target: Some(("≤ rmcp", |_, o, r| o.single_p50 <= r.single_p50)),
        vs_floor: true,
    },
    Metric {
        name: "single-session p99 latency",
        unit: "µs",
        get: |f| f.single_p99,
        target: None,
        vs_floor: true,
    },
    Metric {
        name: "RSS per idle session",
        unit: "bytes",
        get: |f| f.idle_bytes,
        target: Some(("≤ 1024 bytes", |_, o, _| o.idle_bytes <= 1024.0)),
        vs_floor: false,
    },
    Metric {
        name: "wrong replies",
        unit: "",
        get: |f| f.errors as f64,
        target: None,
        vs_floor: false,
    },
];

fn table(plan: &Plan, results: &[(ServerKind, Figures)], protocol: Protocol) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bench-servers, {}: {} sessions × {} workers × {} calls, 1 session × {} calls, {} idle sessions; median of {} run(s); servers pinned to core 0, load on core 1\n",
        protocol.title(),
        plan.sessions,
        plan.sessions,
        plan.calls,
        plan.latency_calls,
        plan.idle,
        plan.reps
    );
    let rmcp = results.iter().find(|(k, _)| *k == ServerKind::Rmcp);
    // Every server but rmcp gets a ratio column and a verdict against rmcp.
    let compared: Vec<&(ServerKind, Figures)> = match rmcp {
        Some(_) => results
            .iter()
            .filter(|(k, _)| !matches!(k, ServerKind::Rmcp | ServerKind::Floor))
            .collect(),
        None => Vec::new(),
    };
    // Every server but the floor and rmcp gets a ratio column against the floor.
    let floor = results.iter().find(|(k, _)| *k == ServerKind::Floor);
    let over_floor: Vec<&(ServerKind, Figures)> = match floor {
        Some(_) => results
            .iter()
            .filter(|(k, _)| !matches!(k, ServerKind::Rmcp | ServerKind::Floor))
            .collect(),
        None => Vec::new(),
    };
    let mut header = String::from("| metric |");
    let mut rule = String::from("|---|");
    for (k, _) in results {
        let _ = write!(header, " {} |", k.name());
        rule.push_str("---:|");
    }
    // After / before, for every server whose baseline build ran too.
    let versus: Vec<(&Figures, &Figures)> = results
        .iter()
        .filter_map(|(k, after)| {
            let base = k.base()?;
            let (_, before) = results.iter().find(|(b, _)| *b == base)?;
            let _ = write!(header, " {}/{} |", k.name(), base.name());
            rule.push_str("---:|");
            Some((after, before))
        })
        .collect();
    for (k, _) in &over_floor {
        let _ = write!(header, " {}/floor |", k.name());
        rule.push_str("---:|");
    }
    for (k, _) in &compared {
        let _ = write!(header, " {}/rmcp |", k.name());
        rule.push_str("---:|");
    }
    // The targets are HTTP/1.1's: the HTTP/2 table has none.
    let targets = !compared.is_empty() && protocol == Protocol::Http1;
    if targets {
        header.push_str(" target |");
        rule.push_str("---|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for m in METRICS {
        let mut row = if m.unit.is_empty() {
            format!("| {} |", m.name)
        } else {
            format!("| {} ({}) |", m.name, m.unit)
        };
        for (_, f) in results {
            let v = (m.get)(f);
            let _ = if v >= 100.0 || v.fract() == 0.0 {
                write!(row, " {v:.0} |")
            } else {
                write!(row, " {v:.1} |")
            };
        }
        for (after, before) in &versus {
            let (a, b) = ((m.get)(after), (m.get)(before));
            if b > 0.0 {
                let _ = write!(row, " {:.2} |", a / b);
            } else {
                row.push_str(" – |");
            }
        }
        if let Some((_, fl)) = floor {
            for (_, o) in &over_floor {
                let (a, b) = ((m.get)(o), (m.get)(fl));
                if b > 0.0 && m.vs_floor {
                    let _ = write!(row, " {:.2} |", a / b);
                } else {
                    row.push_str(" – |");
                }
            }
        }
        let Some((_, r)) = rmcp else {
            let _ = writeln!(out, "{row}");
            continue;
        };
        for (_, o) in &compared {
            let (a, b) = ((m.get)(o), (m.get)(r));
            if b > 0.0 {
                let _ = write!(row, " {:.2} |", a / b);
            } else {
                row.push_str(" – |");
            }
        }
        if targets {
            match m.target {
                Some((text, met)) => {
                    let verdicts: Vec<String> = compared
                        .iter()
                        .map(|(k, o)| {
                            let text = text.replace("{f}", &k.cpu_target().to_string());
                            let verdict = if met(*k, o, r) { "met" } else { "**missed**" };
                            format!("{} {text}: {verdict}", k.name())
                        })
                        .collect();
                    let _ = write!(row, " {} |", verdicts.join("; "));
                }
                None => row.push_str(" |"),
            }
        }
        let _ = writeln!(out, "{row}");
    }
    if let Some((_, fl)) = floor {
        out.push('\n');
        for (k, o) in &over_floor {
            // The median of each repetition's ratio: the two ran side by side in it.
            let ratio = median(
                o.cpu_reps
                    .iter()
                    .zip(&fl.cpu_reps)
                    .map(|(o, f)| o / f)
                    .collect(),
            );
            // The targets are HTTP/1.1's; over HTTP/2 the ratio is reported alone.
            let target = k.floor_target();
            let verdict = match protocol {
                Protocol::Http1 if ratio <= target => format!("target ≤ {target}×): met"),
                Protocol::Http1 => format!("target ≤ {target}×): **missed**"),
                Protocol::Http2 => "the HTTP/2 floor)".to_owned(),
            };
            let _ = writeln!(
                out,
                "{}: server CPU per call {ratio:.2}× the floor (median of the repetitions' ratios; {verdict}",
                k.name()
            );
        }
    }
    out
}

/// The chart of the figures that matter most: CPU per call and latency, per server (and
/// protocol: an HTTP/2 bar is named `NAME h2`).
fn chart(
    path: &std::path::Path,
    results: &[(Protocol, Vec<(ServerKind, Figures)>)],
) -> Result<(), String> {
    let panel = |title: &str, get: fn(&Figures) -> f64| mcp_bench::chart::Panel {
        title: title.to_owned(),
        bars: results
            .iter()
            .flat_map(|(p, r)| r.iter().map(move |(k, f)| (*p, *k, f)))
            .map(|(p, k, f)| {
                let name = match p {
                    Protocol::Http1 => k.name().to_owned(),
                    Protocol::Http2 => format!("{} h2", k.name()),
                };
                (name, get(f))
            })
            .collect(),
    };
    mcp_bench::chart::write_svg(
        path,
        "bench-servers: tools/call echo, 50 sessions × 50 in flight (lower is better)",
        &[
            panel("server CPU per call (µs)", |f| f.cpu_us),
            panel("load p50 latency (µs)", |f| f.load_p50),
            panel("load p99 latency (µs)", |f| f.load_p99),
            panel("single-session p50 latency (µs)", |f| f.single_p50),
        ],
    )
}

fn bench(plan: &Plan, servers: &[ServerKind]) -> ExitCode {
    if !pin_to(1) {
        eprintln!("bench-servers: could not pin the load generator to core 1 (fewer cores?)");
    }
    let rt = match mcp_bench::current_thread() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut all = Vec::new();
    for &protocol in &plan.protocols {
        let (kinds, left_out): (Vec<ServerKind>, Vec<ServerKind>) =
            servers.iter().partition(|k| k.speaks(protocol));
        for k in &left_out {
            println!(
                "{}: left out of the {} table (async-h1 speaks HTTP/1.1 only)\n",
                k.name(),
                protocol.title()
            );
        }
        if kinds.is_empty() {
            continue;
        }
        let results = match rt.block_on(measure_all(plan, &kinds, protocol)) {
            Ok(results) => results,
            Err(e) => {
                eprintln!("bench-servers ({}): {e}", protocol.name());
                return ExitCode::FAILURE;
            }
        };
        println!("{}", table(plan, &results, protocol));
        all.push((protocol, results));
    }
    let path = mcp_bench::chart_path("servers.svg", plan.quick);
    match chart(&path, &all) {
        Ok(()) => println!("chart: {}", path.display()),
        Err(e) => {
            eprintln!("bench-servers: chart: {e}");
            return ExitCode::FAILURE;
        }
    }
    let mut failed = false;
    for (p, k, f) in all
        .iter()
        .flat_map(|(p, r)| r.iter().map(move |(k, f)| (p, k, f)))
    {
        if f.errors > 0 {
            failed = true;
            println!(
                "{} ({}): {} wrong replies (RUN INVALID); first: {}",
                k.name(),
                p.name(),
                f.errors,
                f.first_error.as_deref().unwrap_or("?")
            );
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
