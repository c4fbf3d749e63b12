//! Side-by-side benchmark of our servers (tokio and smol adapters) and rmcp's streamable HTTP
//! server.
//!
//! ```text
//! cargo run --release -p mcp-bench --bin bench-servers [-- --quick] [--servers ours,smol,rmcp] [--reps N]
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
//!    latency, and server CPU per call (utime+stime from `/proc/<pid>/stat` over the phase);
//! 2. latency: 1 session at concurrency 1: p50/p99;
//! 3. idle: `idle` sessions opened (initialize + notifications/initialized) and left idle:
//!    the server's VmRSS delta (`/proc/<pid>/status`) per session.
//!
//! Phases 1-2 are repeated `--reps` times and the median of each figure is reported. The
//! table at the end has one row per metric, one column per server, the ratio of each of ours
//! to rmcp and whether each target is met (CPU per call ≤ 0.5× rmcp for tokio, ≤ 0.6× for smol;
//! ≤ 2 KB per idle session; single-session p50 ≤ rmcp). The exit status is 1 if any reply was
//! wrong.
//!
//! The server list is data ([`ServerKind::ALL`]): another server is one variant away.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// The protocol revision both servers negotiate (the newest with sessions in both).
const PROTOCOL_VERSION: &str = "2025-11-25";
/// `sysconf(_SC_CLK_TCK)`: the unit of `/proc/<pid>/stat` times, 100 on every Linux ABI
/// (`USER_HZ`), read without `libc` because this package denies unsafe code.
const CLOCK_TICKS_PER_SEC: u64 = 100;

// ------------------------------------------------------------------------------------------
// The servers under test.

/// A server the benchmark knows how to start. Add a variant (and its arms) for another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerKind {
    /// `mcp_tokio::serve` on `mcp_proto::service::Server`.
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

/// The `bench-servers` binary of the baseline build (`--baseline`).
static BASELINE: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

impl ServerKind {
    const ALL: [ServerKind; 3] = [ServerKind::Ours, ServerKind::Smol, ServerKind::Rmcp];
    const KNOWN: [ServerKind; 5] = [
        ServerKind::Ours,
        ServerKind::Smol,
        ServerKind::Rmcp,
        ServerKind::OursBase,
        ServerKind::SmolBase,
    ];

    fn name(self) -> &'static str {
        match self {
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
            ServerKind::Ours | ServerKind::OursBase | ServerKind::Rmcp => 0.5,
        }
    }

    fn parse(name: &str) -> Option<ServerKind> {
        ServerKind::KNOWN.into_iter().find(|k| k.name() == name)
    }

    /// What this server is compared with as "before": the baseline build of the same one.
    fn base(self) -> Option<ServerKind> {
        match self {
            ServerKind::Ours => Some(ServerKind::OursBase),
            ServerKind::Smol => Some(ServerKind::SmolBase),
            _ => None,
        }
    }

    /// Serves until stdin closes (the parent ended or dropped it).
    async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        match self {
            ServerKind::Ours => ours::serve(listener).await,
            // Served by its own runtime (see `main`), never through a tokio listener.
            ServerKind::Smol => Err(std::io::Error::other("the smol server runs on smol")),
            ServerKind::Rmcp => rmcp_server::serve(listener).await,
            ServerKind::OursBase | ServerKind::SmolBase => Err(std::io::Error::other(
                "a baseline server runs in the baseline binary",
            )),
        }
    }
}

mod ours {
    use mcp_proto::server::ServerConfig;
    use mcp_proto::service::{CallToolResult, Server, Tool, ToolArgs, required};

    /// The echo server, the same for both of our adapters.
    pub(crate) fn server() -> Server {
        Server::new("bench-ours", env!("CARGO_PKG_VERSION")).tool(
                Tool::new("echo")
                    .description("Returns its text")
                    .string("text", required().description("The text to return")),
                |_ctx, args: ToolArgs| async move {
                    Ok(CallToolResult::text(args.get_string("text", "")))
                },
            )
    }

    /// Room for the load, latency and idle sessions of every repetition.
    pub(crate) fn config() -> ServerConfig {
        ServerConfig::default().with_max_sessions(100_000)
    }

    pub(crate) async fn serve(listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let serving = mcp_tokio::serve(listener, server(), config())?;
        println!("bench server on {}", serving.url());
        super::wait_for_stdin_eof().await;
        serving.shutdown_handle().shutdown();
        Ok(())
    }
}

mod smol_server {
    /// `mcp_smol::serve` of the same echo server; runs inside `smol::block_on`.
    pub(crate) async fn serve(bind: &str) -> std::io::Result<()> {
        let listener = smol::net::TcpListener::bind(bind).await?;
        let serving = mcp_smol::serve(listener, super::ours::server(), super::ours::config())?;
        println!("bench server on {}", serving.url());
        super::wait_for_stdin_eof().await;
        serving.shutdown_handle().shutdown();
        Ok(())
    }
}

mod rmcp_server {
    use std::sync::Arc;

    use hyper_util::rt::TokioIo;
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

    pub(crate) async fn serve(listener: tokio::net::TcpListener) -> std::io::Result<()> {
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
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        };
        tokio::select! {
            () = accept => {}
            () = super::wait_for_stdin_eof() => {}
        }
        Ok(())
    }
}

/// Resolves when stdin reaches its end (the parent closed it or exited).
async fn wait_for_stdin_eof() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        let _ = tx.send(());
    });
    let _ = rx.await;
}

// ------------------------------------------------------------------------------------------
// Arguments.

#[derive(Debug, Clone)]
struct Plan {
    sessions: usize,
    calls: u64,
    warmup_calls: u64,
    latency_calls: u64,
    idle: usize,
    reps: usize,
}

impl Plan {
    fn full() -> Plan {
        Plan {
            sessions: 50,
            calls: 20_000,
            warmup_calls: 2_000,
            latency_calls: 2_000,
            idle: 10_000,
            reps: 3,
        }
    }

    fn quick() -> Plan {
        Plan {
            sessions: 5,
            calls: 500,
            warmup_calls: 50,
            latency_calls: 100,
            idle: 200,
            reps: 1,
        }
    }
}

const USAGE: &str =
    "usage: bench-servers [--quick] [--servers ours,smol,rmcp] [--reps N] [--baseline PATH]
       bench-servers --serve NAME [--bind ADDR:PORT] [--core N]
  --quick    small counts (5 sessions, 500 calls, 200 idle sessions, 1 repetition): a smoke test
  --servers  which servers to compare, in order (default: ours,smol,rmcp)
  --reps     repetitions of the load and latency phases (medians are reported; default 3)
  --baseline the bench-servers binary of another build: its servers are ours@base and smol@base
             (e.g. --servers ours,ours@base,smol,smol@base), compared before/after in one run
  --serve    run one server (what the benchmark starts in a child process)";

enum Mode {
    Bench {
        plan: Plan,
        servers: Vec<ServerKind>,
    },
    Serve {
        kind: ServerKind,
        bind: String,
        core: usize,
    },
}

fn parse_args() -> Result<Mode, String> {
    let mut plan = Plan::full();
    let mut reps = None;
    let mut servers = ServerKind::ALL.to_vec();
    let mut serve = None;
    let mut bind = "127.0.0.1:0".to_owned();
    let mut core = 0;
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
        return Ok(Mode::Serve { kind, bind, core });
    }
    if let Some(reps) = reps {
        plan.reps = reps.max(1);
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
    Ok(Mode::Bench { plan, servers })
}

/// Pins the calling thread (and so every thread it starts later) to `core`, if it exists.
/// (Not looked up in `get_core_ids`, which lists only the cores of the current mask: a
/// server child inherits the load generator's.)
fn pin_to(core: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: core })
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
        Mode::Serve { kind, bind, core } => {
            if !pin_to(core) {
                eprintln!("bench server: could not pin to core {core}");
            }
            let result = if kind == ServerKind::Smol {
                // smol's executor threads start after the pinning and inherit it.
                smol::block_on(smol_server::serve(&bind))
            } else {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        eprintln!("no runtime: {e}");
                        return ExitCode::FAILURE;
                    }
                };
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::bind(&bind).await?;
                    kind.serve(listener).await
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
        Mode::Bench { plan, servers } => bench(&plan, &servers),
    }
}

// ------------------------------------------------------------------------------------------
// The child processes.

struct ServerProcess {
    child: Child,
    /// Closing it (drop) tells the server to stop.
    stdin: Option<ChildStdin>,
    url: String,
    authority: String,
    path: String,
}

impl ServerProcess {
    fn start(kind: ServerKind) -> Result<ServerProcess, String> {
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
        let mut child = Command::new(exe)
            .args(["--serve", name, "--bind", "127.0.0.1:0", "--core", "0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start the {} server: {e}", kind.name()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("reading the {} server's URL: {e}", kind.name()))?;
        let Some(url) = line.trim().strip_prefix("bench server on ") else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the {} server printed {line:?}", kind.name()));
        };
        let rest = url.strip_prefix("http://").ok_or("not an http URL")?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        Ok(ServerProcess {
            url: url.to_owned(),
            authority: authority.to_owned(),
            path: if path.is_empty() { "/" } else { path }.to_owned(),
            child,
            stdin,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// utime + stime of the whole process, in clock ticks.
    fn cpu_ticks(&self) -> Result<u64, String> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))
            .map_err(|e| format!("/proc/{}/stat: {e}", self.pid()))?;
        // Fields after the `(comm)`, which may contain spaces: state is field 3, utime 14.
        let after = stat.rsplit_once(')').map(|(_, r)| r).ok_or("bad stat")?;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let num = |i: usize| -> Result<u64, String> {
            fields
                .get(i - 3)
                .and_then(|f| f.parse().ok())
                .ok_or(format!("bad stat field {i}"))
        };
        Ok(num(14)? + num(15)?)
    }

    /// VmRSS in bytes.
    fn rss_bytes(&self) -> Result<u64, String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .map_err(|e| format!("/proc/{}/status: {e}", self.pid()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|kb| kb.trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .ok_or_else(|| "no VmRSS".to_owned())
    }

    fn stop(mut self) {
        drop(self.stdin.take());
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ------------------------------------------------------------------------------------------
// The neutral client: one hyper HTTP/1.1 keep-alive connection, identical requests.

struct Conn {
    send: SendRequest<Full<Bytes>>,
    authority: Arc<str>,
    path: Arc<str>,
}

/// What a reply was wrong about.
type Wrong = String;

impl Conn {
    async fn open(target: &Target) -> Result<Conn, String> {
        let tcp = tokio::net::TcpStream::connect(&*target.authority)
            .await
            .map_err(|e| format!("connect {}: {e}", target.authority))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn {
            send,
            authority: target.authority.clone(),
            path: target.path.clone(),
        })
    }

    /// POSTs `body`; returns the status, the session id header and the body.
    async fn post(
        &mut self,
        session: Option<&str>,
        body: Bytes,
    ) -> Result<(u16, Option<String>, Option<String>, Bytes), Wrong> {
        let mut req = http::Request::post(&*self.path)
            .header(http::header::HOST, &*self.authority)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL_VERSION);
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
        self.send.ready().await.map_err(|e| format!("send: {e}"))?;
        let resp = self
            .send
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let sid = header("mcp-session-id");
        let ctype = header("content-type");
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok((status, sid, ctype, body))
    }

    /// Sends one JSON-RPC request and returns its response message (from a JSON body or
    /// the SSE event that carries it).
    async fn rpc(
        &mut self,
        session: Option<&str>,
        id: u64,
        body: Bytes,
    ) -> Result<(Option<String>, Value), Wrong> {
        let (status, sid, ctype, body) = self.post(session, body).await?;
        if status != 200 {
            return Err(format!(
                "status {status}: {}",
                String::from_utf8_lossy(&body)
            ));
        }
        let msg = match ctype.as_deref() {
            Some(c) if c.starts_with("application/json") => {
                serde_json::from_slice::<Value>(&body).map_err(|e| format!("JSON body: {e}"))?
            }
            Some(c) if c.starts_with("text/event-stream") => sse_response(&body, id)?,
            other => return Err(format!("content type {other:?}")),
        };
        if msg.get("id") != Some(&json!(id)) {
            return Err(format!("reply to another id: {msg}"));
        }
        Ok((sid, msg))
    }
}

/// The JSON-RPC response with `id` among the `data:` payloads of an SSE body.
fn sse_response(body: &[u8], id: u64) -> Result<Value, Wrong> {
    let text = std::str::from_utf8(body).map_err(|e| format!("SSE body: {e}"))?;
    let mut data = String::new();
    let mut found = None;
    // Events end at a blank line; their `data:` lines join with '\n'.
    for line in text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        if line.is_empty() {
            if !data.is_empty() {
                if let Ok(v) = serde_json::from_str::<Value>(&data)
                    && v.get("id") == Some(&json!(id))
                {
                    found = Some(v);
                }
                data.clear();
            }
        } else if let Some(d) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        }
    }
    found.ok_or_else(|| format!("no response with id {id} in the SSE body {text:?}"))
}

#[derive(Clone)]
struct Target {
    authority: Arc<str>,
    path: Arc<str>,
}

/// A session: its id, on its own connection.
struct Session {
    conn: Conn,
    id: String,
}

async fn open_session(target: &Target, conn: Option<Conn>) -> Result<Session, Wrong> {
    let mut conn = match conn {
        Some(c) => c,
        None => Conn::open(target).await?,
    };
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench-servers", "version": "0"},
        },
    });
    let (sid, msg) = conn.rpc(None, 0, Bytes::from(init.to_string())).await?;
    if msg.pointer("/result/protocolVersion").is_none() {
        return Err(format!("initialize failed: {msg}"));
    }
    let id = sid.ok_or("initialize: no session id")?;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _, body) = conn.post(Some(&id), Bytes::from(note.to_string())).await?;
    if status != 202 {
        return Err(format!(
            "notifications/initialized: status {status}: {}",
            String::from_utf8_lossy(&body)
        ));
    }
    Ok(Session { conn, id })
}

fn echo_body(id: u64) -> (Bytes, String) {
    let text = format!("bench {id}");
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    });
    (Bytes::from(body.to_string()), text)
}

async fn call_echo(session: &mut Session, id: u64) -> Result<(), Wrong> {
    let (body, text) = echo_body(id);
    let (_, msg) = session.conn.rpc(Some(&session.id), id, body).await?;
    match msg
        .pointer("/result/content/0/text")
        .and_then(Value::as_str)
    {
        Some(t) if t == text && msg.pointer("/result/isError") != Some(&json!(true)) => Ok(()),
        _ => Err(format!("not the echo of {text:?}: {msg}")),
    }
}

// ------------------------------------------------------------------------------------------
// The phases.

#[derive(Debug, Default, Clone)]
struct LoadRun {
    calls: u64,
    errors: u64,
    first_error: Option<String>,
    elapsed: Duration,
    latencies_us: Vec<u64>,
    cpu_ticks: u64,
}

impl LoadRun {
    fn rps(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }
    fn cpu_us_per_call(&self) -> f64 {
        (self.cpu_ticks as f64 * 1e6 / CLOCK_TICKS_PER_SEC as f64) / self.calls.max(1) as f64
    }
    fn percentile(&mut self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        self.latencies_us.sort_unstable();
        let i = ((self.latencies_us.len() - 1) as f64 * p).round() as usize;
        self.latencies_us[i] as f64
    }
}

/// `calls` echo calls over `sessions` (one worker each), measuring the server's CPU.
async fn load(
    server: &ServerProcess,
    sessions: Vec<Session>,
    calls: u64,
    next_id: &Arc<AtomicU64>,
) -> Result<(LoadRun, Vec<Session>), String> {
    let left = Arc::new(AtomicU64::new(calls));
    let errors = Arc::new(AtomicUsize::new(0));
    let cpu0 = server.cpu_ticks()?;
    let t0 = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for mut session in sessions {
        let left = left.clone();
        let next_id = next_id.clone();
        workers.spawn(async move {
            let mut lat = Vec::new();
            let mut first_error = None;
            let mut errors = 0;
            let mut done = 0;
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                match call_echo(&mut session, id).await {
                    Ok(()) => lat.push(t.elapsed().as_micros() as u64),
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert(e);
                    }
                }
                done += 1;
            }
            (session, lat, errors, first_error, done)
        });
    }
    let mut run = LoadRun::default();
    let mut back = Vec::new();
    while let Some(joined) = workers.join_next().await {
        let (session, lat, errs, first, done) = joined.map_err(|e| format!("worker: {e}"))?;
        back.push(session);
        run.latencies_us.extend(lat);
        run.errors += errs;
        run.calls += done;
        if run.first_error.is_none() {
            run.first_error = first;
        }
    }
    run.elapsed = t0.elapsed();
    run.cpu_ticks = server.cpu_ticks()?.saturating_sub(cpu0);
    let _ = errors;
    Ok((run, back))
}

async fn open_sessions(target: &Target, n: usize) -> Result<Vec<Session>, String> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let target = target.clone();
        set.spawn(async move { open_session(&target, None).await });
    }
    let mut out = Vec::new();
    while let Some(s) = set.join_next().await {
        out.push(s.map_err(|e| e.to_string())??);
    }
    Ok(out)
}

/// Opens `n` sessions over a few connections (closed afterwards) and leaves them idle;
/// returns the RSS delta per session and the number of failures.
async fn idle(server: &ServerProcess, target: &Target, n: usize) -> Result<(f64, u64), String> {
    const CONNECTIONS: usize = 16;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss0 = server.rss_bytes()?;
    let left = Arc::new(AtomicUsize::new(n));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..CONNECTIONS.min(n) {
        let target = target.clone();
        let left = left.clone();
        set.spawn(async move {
            let mut conn = Some(Conn::open(&target).await?);
            let mut failures = 0u64;
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                match open_session(&target, conn.take()).await {
                    Ok(s) => conn = Some(s.conn),
                    Err(_) => failures += 1,
                }
            }
            Ok::<u64, String>(failures)
        });
    }
    let mut failures = 0;
    while let Some(r) = set.join_next().await {
        failures += r.map_err(|e| e.to_string())??;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss1 = server.rss_bytes()?;
    Ok((rss1.saturating_sub(rss0) as f64 / n as f64, failures))
}

#[derive(Debug, Default)]
struct Figures {
    rps: f64,
    load_p50: f64,
    load_p99: f64,
    cpu_us: f64,
    single_p50: f64,
    single_p99: f64,
    idle_bytes: f64,
    errors: u64,
    first_error: Option<String>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

async fn measure(kind: ServerKind, plan: &Plan) -> Result<Figures, String> {
    let server = ServerProcess::start(kind)?;
    eprintln!("{}: pid {} at {}", kind.name(), server.pid(), server.url);
    let target = Target {
        authority: server.authority.clone().into(),
        path: server.path.clone().into(),
    };
    let next_id = Arc::new(AtomicU64::new(1));
    let mut fig = Figures::default();
    let note = |run: &LoadRun, fig: &mut Figures| {
        fig.errors += run.errors;
        if fig.first_error.is_none() {
            fig.first_error.clone_from(&run.first_error);
        }
    };
    let mut sessions = open_sessions(&target, plan.sessions).await?;
    let mut single = open_sessions(&target, 1).await?;
    // Warm-up (not measured): connections, allocator, caches.
    let (run, back) = load(&server, sessions, plan.warmup_calls, &next_id).await?;
    note(&run, &mut fig);
    sessions = back;
    let (mut rps, mut p50, mut p99, mut cpu, mut s50, mut s99) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for rep in 0..plan.reps {
        let (mut run, back) = load(&server, sessions, plan.calls, &next_id).await?;
        sessions = back;
        note(&run, &mut fig);
        rps.push(run.rps());
        p50.push(run.percentile(0.5));
        p99.push(run.percentile(0.99));
        cpu.push(run.cpu_us_per_call());
        let (mut lat, back) = load(&server, single, plan.latency_calls, &next_id).await?;
        single = back;
        note(&lat, &mut fig);
        s50.push(lat.percentile(0.5));
        s99.push(lat.percentile(0.99));
        eprintln!(
            "{} rep {}: {:.0} req/s, p50 {:.0} µs, p99 {:.0} µs, {:.1} µs CPU/call; single p50 {:.0} µs",
            kind.name(),
            rep + 1,
            run.rps(),
            run.percentile(0.5),
            run.percentile(0.99),
            run.cpu_us_per_call(),
            lat.percentile(0.5),
        );
    }
    fig.rps = median(rps);
    fig.load_p50 = median(p50);
    fig.load_p99 = median(p99);
    fig.cpu_us = median(cpu);
    fig.single_p50 = median(s50);
    fig.single_p99 = median(s99);
    drop(sessions);
    drop(single);
    let (bytes, failures) = idle(&server, &target, plan.idle).await?;
    fig.idle_bytes = bytes;
    fig.errors += failures;
    if failures > 0 && fig.first_error.is_none() {
        fig.first_error = Some(format!("{failures} idle sessions failed to open"));
    }
    eprintln!(
        "{}: {:.0} bytes per idle session",
        kind.name(),
        fig.idle_bytes
    );
    server.stop();
    Ok(fig)
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
}

const METRICS: &[Metric] = &[
    Metric {
        name: "load throughput",
        unit: "req/s",
        get: |f| f.rps,
        target: None,
    },
    Metric {
        name: "load p50 latency",
        unit: "µs",
        get: |f| f.load_p50,
        target: None,
    },
    Metric {
        name: "load p99 latency",
        unit: "µs",
        get: |f| f.load_p99,
        target: None,
    },
    Metric {
        name: "server CPU per call",
        unit: "µs",
        get: |f| f.cpu_us,
        target: Some(("≤ {f}× rmcp", |k, o, r| {
            o.cpu_us <= k.cpu_target() * r.cpu_us
        })),
    },
    Metric {
        name: "single-session p50 latency",
        unit: "µs",
        get: |f| f.single_p50,
        target: Some(("≤ rmcp", |_, o, r| o.single_p50 <= r.single_p50)),
    },
    Metric {
        name: "single-session p99 latency",
        unit: "µs",
        get: |f| f.single_p99,
        target: None,
    },
    Metric {
        name: "RSS per idle session",
        unit: "bytes",
        get: |f| f.idle_bytes,
        target: Some(("≤ 2048 bytes", |_, o, _| o.idle_bytes <= 2048.0)),
    },
    Metric {
        name: "wrong replies",
        unit: "",
        get: |f| f.errors as f64,
        target: None,
    },
];

fn table(plan: &Plan, results: &[(ServerKind, Figures)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "bench-servers: {} sessions × {} workers × {} calls, 1 session × {} calls, {} idle sessions; median of {} run(s); servers pinned to core 0, load on core 1\n",
        plan.sessions, plan.sessions, plan.calls, plan.latency_calls, plan.idle, plan.reps
    );
    let rmcp = results.iter().find(|(k, _)| *k == ServerKind::Rmcp);
    // Every server but rmcp gets a ratio column and a verdict against rmcp.
    let compared: Vec<&(ServerKind, Figures)> = match rmcp {
        Some(_) => results
            .iter()
            .filter(|(k, _)| *k != ServerKind::Rmcp)
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
    for (k, _) in &compared {
        let _ = write!(header, " {}/rmcp |", k.name());
        rule.push_str("---:|");
    }
    if !compared.is_empty() {
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
        if !compared.is_empty() {
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
    out
}

fn bench(plan: &Plan, servers: &[ServerKind]) -> ExitCode {
    if !pin_to(1) {
        eprintln!("bench-servers: could not pin the load generator to core 1 (fewer cores?)");
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut results = Vec::new();
    for &kind in servers {
        match rt.block_on(measure(kind, plan)) {
            Ok(f) => results.push((kind, f)),
            Err(e) => {
                eprintln!("bench-servers: {} failed: {e}", kind.name());
                return ExitCode::FAILURE;
            }
        }
    }
    println!("{}", table(plan, &results));
    let mut failed = false;
    for (k, f) in &results {
        if f.errors > 0 {
            failed = true;
            println!(
                "{}: {} wrong replies (RUN INVALID); first: {}",
                k.name(),
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
