//! Real external services for the multi-instance tests: a [`Redis`] server and an [`Nginx`]
//! round-robin load balancer, each a child process of the test, on a free loopback port, in a
//! temporary directory of its own.
//!
//! Each value is a guard: dropping it kills its process by PID (`SIGKILL`), reaps it, and
//! removes its directory, so a test owns every process it starts, even when it panics. Each
//! start waits (boundedly: [`READY_WITHIN`]) until the service answers a request that only
//! this instance can answer (Redis: `CONFIG GET dir` names its directory; nginx: a reserved
//! path returns its directory's name), and retries on another port when the one it picked
//! was taken in between.
//!
//! When the binary is not installed (searched in `PATH`, then `/usr/sbin`, `/usr/local/sbin`,
//! `/sbin`, `/usr/bin`), a start returns [`ServiceError::NotInstalled`], whose message names
//! the Debian package. [`require_service!`](crate::require_service) turns that into a skip on
//! a developer's machine ("skipped: redis-server not installed (apt-get install
//! redis-server)") and into a failure in CI (`CI` set to anything but empty, `0` or `false`):
//! CI installs both packages (`.ci/run`) and must run these tests.
//!
//! ```no_run
//! use mcp_tests::require_service;
//! use mcp_tests::services::{Nginx, Redis};
//!
//! # fn upstreams() -> Vec<std::net::SocketAddr> { Vec::new() }
//! fn a_cluster_test() {
//!     let redis = require_service!(Redis::start());
//!     let lb = require_service!(Nginx::round_robin(&upstreams()));
//!     // ... redis.url() is `redis://127.0.0.1:PORT`, lb.url() is `http://127.0.0.1:PORT`
//! }
//! ```
//!
//! nginx runs in the foreground (`daemon off`) as a single process (`master_process off`),
//! so that the PID of the child is the only process to stop: no orphaned worker can outlive
//! a test that was killed between two checks. Everything it writes (configuration, PID file,
//! error and access logs, client-body and proxy temporary files) is under its own prefix
//! directory, so it runs as root without touching `/var` or `/etc/nginx`.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a start waits for its service to answer before it gives up.
pub const READY_WITHIN: Duration = Duration::from_secs(10);

/// How many free ports a start tries when the one it picked was taken before the service
/// could bind it.
const PORT_ATTEMPTS: usize = 5;

/// Directories searched after `PATH` (a non-login root shell may lack the `sbin` ones).
const FALLBACK_DIRS: &[&str] = &["/usr/sbin", "/usr/local/sbin", "/sbin", "/usr/bin"];

/// Why a service could not be started.
#[derive(Debug)]
pub enum ServiceError {
    /// Its binary is not installed; `package` is the Debian package that brings it.
    NotInstalled {
        /// The binary that was searched for.
        binary: &'static str,
        /// The Debian package to install.
        package: &'static str,
    },
    /// It is installed but did not start or did not answer in time (with its log's tail).
    Failed(String),
}

impl fmt::Display for ServiceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotInstalled { binary, package } => {
                write!(f, "{binary} not installed (apt-get install {package})")
            }
            Self::Failed(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for ServiceError {}

/// Reports that a service a test needs is unavailable: returns (the caller skips, after a
/// `skipped: ...` line on stderr) only when it is not installed and `CI` is not set; panics
/// otherwise (a service that is installed but fails to start is a failure everywhere).
pub fn unavailable(err: &ServiceError) {
    unavailable_under(err, std::env::var("CI").ok().as_deref());
}

fn unavailable_under(err: &ServiceError, ci: Option<&str>) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    match err {
        ServiceError::NotInstalled { .. } if crate::ci_forbids_skipping(ci) => {
            panic!("{test}: {err}; CI is set, so this fails instead of skipping")
        }
        ServiceError::NotInstalled { .. } => eprintln!("{test}: skipped: {err}"),
        ServiceError::Failed(_) => panic!("{test}: {err}"),
    }
}

/// Starts a service or skips the calling test (`return`s from it) when its binary is not
/// installed on a developer's machine; fails the test in CI, or when the service is
/// installed but does not start. See the [module documentation](crate::services).
#[macro_export]
macro_rules! require_service {
    ($start:expr) => {
        match $start {
            ::std::result::Result::Ok(service) => service,
            ::std::result::Result::Err(err) => {
                $crate::services::unavailable(&err);
                return;
            }
        }
    };
}

/// The path of executable `name`: in `PATH` first, then in the usual `sbin` directories.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(FALLBACK_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn locate(binary: &'static str, package: &'static str) -> Result<PathBuf, ServiceError> {
    find_binary(binary).ok_or(ServiceError::NotInstalled { binary, package })
}

/// A loopback port that was free a moment ago, for a service started next (a child process
/// binds it; a cluster's instances keep theirs across restarts).
///
/// Not the kernel's pick for port 0: that comes from the ephemeral range, where every
/// outgoing connection of every test running at the same time also takes its local port, so
/// a port free a moment ago could be taken before the child binds it (which failed a run:
/// "Address already in use"). These ports come from the [`RESERVED_SPAN`] ports just below
/// the ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), which nothing takes
/// implicitly, each handed out once per process (a counter, starting at an offset drawn from
/// the PID so that concurrent test processes start apart) and checked free by binding it.
pub fn free_loopback_port() -> io::Result<u16> {
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    let base = ephemeral_low.saturating_sub(RESERVED_SPAN).max(1024);
    let span = ephemeral_low.saturating_sub(base).max(1);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7_919) % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let Ok(port) = u16::try_from(base + n % span) else {
            continue;
        };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok(port);
        }
    }
    // Every reserved port is taken: the kernel's pick, as a last resort.
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

/// How many ports below the ephemeral range [`free_loopback_port`] draws from.
pub const RESERVED_SPAN: u32 = 8_000;

fn failed(what: impl fmt::Display) -> ServiceError {
    ServiceError::Failed(what.to_string())
}

fn temp_dir(service: &str) -> Result<TempDir, ServiceError> {
    tempfile::Builder::new()
        .prefix(&format!("mcp-tests-{service}-"))
        .tempdir()
        .map_err(|e| {
            failed(format!(
                "{service}: cannot create a temporary directory: {e}"
            ))
        })
}

/// The last `lines` lines of the file at `path` (empty when it cannot be read).
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A child process that is killed (`SIGKILL` to its PID) and reaped when dropped.
#[derive(Debug)]
struct Process {
    child: Child,
}

impl Process {
    fn spawn(command: &mut Command, what: &str) -> Result<Self, ServiceError> {
        command
            .stdin(Stdio::null())
            .spawn()
            .map(|child| Self { child })
            .map_err(|e| failed(format!("cannot run {what}: {e}")))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Kills the process by its PID unless it has already exited, and reaps it.
    fn stop(&mut self) {
        if self.exited().is_none() {
            // SIGKILL cannot be ignored: the `wait` below returns as soon as the kernel has
            // torn the process down.
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How a start attempt failed: the port was taken (another attempt may succeed), or not.
enum Attempt {
    PortTaken(String),
    Failed(ServiceError),
}

impl From<ServiceError> for Attempt {
    fn from(err: ServiceError) -> Self {
        Self::Failed(err)
    }
}

/// Polls `probe` every 20 ms until it says ready, `process` exits, or [`READY_WITHIN`] passes.
/// `log` is read for the error when it does not come up.
fn wait_ready(
    process: &mut Process,
    what: &str,
    log: &Path,
    mut probe: impl FnMut() -> bool,
) -> Result<(), Attempt> {
    let deadline = Instant::now() + READY_WITHIN;
    loop {
        if let Some(status) = process.exited() {
            let log = tail(log, 20);
            return Err(if log.contains("Address already in use") {
                Attempt::PortTaken(log)
            } else {
                Attempt::Failed(failed(format!("{what} exited at start ({status}):\n{log}")))
            });
        }
        if probe() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Attempt::Failed(failed(format!(
                "{what} did not answer within {READY_WITHIN:?}:\n{}",
                tail(log, 20)
            ))));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `attempt` on fresh free ports until one is not taken by someone else in between.
fn on_a_free_port<T>(
    what: &str,
    mut attempt: impl FnMut(u16) -> Result<T, Attempt>,
) -> Result<T, ServiceError> {
    let mut last = String::new();
    for _ in 0..PORT_ATTEMPTS {
        let port = free_loopback_port().map_err(|e| failed(format!("no free port: {e}")))?;
        match attempt(port) {
            Ok(started) => return Ok(started),
            Err(Attempt::PortTaken(log)) => last = log,
            Err(Attempt::Failed(err)) => return Err(err),
        }
    }
    Err(failed(format!(
        "{what}: {PORT_ATTEMPTS} free ports were taken before it could bind them:\n{last}"
    )))
}

// ---------------------------------------------------------------------------------------------
// Redis
// ---------------------------------------------------------------------------------------------

/// A `redis-server` on `127.0.0.1`, killed by PID when dropped.
///
/// Started without persistence ([`start`](Self::start): `--save '' --appendonly no`), or
/// with an append-only file synced on every write ([`start_persistent`](Self::start_persistent)),
/// in which case [`restart`](Self::restart) brings back everything that was acknowledged. Its
/// `DEBUG` command is enabled for local connections, so that a test can make Redis slow
/// (`DEBUG SLEEP`).
#[derive(Debug)]
pub struct Redis {
    process: Option<Process>,
    binary: PathBuf,
    port: u16,
    persistent: bool,
    dir: TempDir,
}

impl Redis {
    /// Starts a server without persistence on a free loopback port.
    ///
    /// # Errors
    ///
    /// [`ServiceError::NotInstalled`] without `redis-server`; [`ServiceError::Failed`] when
    /// it does not answer within [`READY_WITHIN`].
    pub fn start() -> Result<Self, ServiceError> {
        Self::launch(false)
    }

    /// Starts a server whose data survives [`restart`](Self::restart) (`--appendonly yes
    /// --appendfsync always`).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_persistent() -> Result<Self, ServiceError> {
        Self::launch(true)
    }

    fn launch(persistent: bool) -> Result<Self, ServiceError> {
        let binary = locate("redis-server", "redis-server")?;
        let dir = temp_dir("redis")?;
        let (process, port) = on_a_free_port("redis-server", |port| {
            spawn_redis(&binary, port, dir.path(), persistent).map(|p| (p, port))
        })?;
        Ok(Self {
            process: Some(process),
            binary,
            port,
            persistent,
            dir,
        })
    }

    /// Its address, `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port).into()
    }

    /// Its URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr())
    }

    /// The PID of the running server, `None` after [`kill`](Self::kill).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Process::pid)
    }

    /// Its directory (working directory, log, append-only file).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The end of its log (for a failing test's message).
    pub fn log_tail(&self) -> String {
        tail(&self.dir.path().join("redis.log"), 40)
    }

    /// Kills the server by its PID (`SIGKILL`: no shutdown save) and reaps it. The port
    /// and directory stay reserved for [`restart`](Self::restart).
    pub fn kill(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.stop();
        }
    }

    /// Kills the server if it runs, and starts it again on the same port and directory.
    ///
    /// # Errors
    ///
    /// [`ServiceError::Failed`] when it does not come back (the port was taken meanwhile,
    /// or it does not answer within [`READY_WITHIN`]).
    pub fn restart(&mut self) -> Result<(), ServiceError> {
        self.kill();
        let process = spawn_redis(&self.binary, self.port, self.dir.path(), self.persistent)
            .map_err(|attempt| match attempt {
                Attempt::PortTaken(log) => failed(format!(
                    "redis-server: port {} was taken while it was down:\n{log}",
                    self.port
                )),
                Attempt::Failed(err) => err,
            })?;
        self.process = Some(process);
        Ok(())
    }

    /// A new plain connection to it (see [`Resp`]).
    ///
    /// # Errors
    ///
    /// When it cannot connect.
    pub fn connect(&self) -> io::Result<Resp> {
        Resp::connect(self.addr())
    }
}

fn spawn_redis(binary: &Path, port: u16, dir: &Path, persistent: bool) -> Result<Process, Attempt> {
    let log = dir.join("redis.log");
    let mut command = Command::new(binary);
    command
        .arg("--port")
        .arg(port.to_string())
        .args(["--bind", "127.0.0.1", "--daemonize", "no", "--save", ""])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(&log)
        .args(["--enable-debug-command", "local"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if persistent {
        command.args(["--appendonly", "yes", "--appendfsync", "always"]);
    } else {
        command.args(["--appendonly", "no"]);
    }
    let mut process = Process::spawn(&mut command, "redis-server")?;
    // Ready when `PING` is answered (it is refused with `-LOADING` until the append-only file
    // is loaded; `CONFIG` is not) and `CONFIG GET dir` on that port names this server's
    // directory (and not that of another server that took the port).
    let want = dir
        .canonicalize()
        .unwrap_or_else(|_| dir.to_path_buf())
        .into_os_string()
        .into_string()
        .unwrap_or_default();
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
    wait_ready(&mut process, "redis-server", &log, || {
        let Ok(mut conn) = Resp::connect(addr) else {
            return false;
        };
        conn.command(&["PING"])
            .is_ok_and(|pong| pong == RespValue::Simple("PONG".into()))
            && conn
                .command(&["CONFIG", "GET", "dir"])
                .is_ok_and(|reply| match reply {
                    RespValue::Array(Some(items)) => items
                        .get(1)
                        .and_then(RespValue::as_text)
                        .is_some_and(|d| d == want),
                    _ => false,
                })
    })?;
    Ok(process)
}

/// A reply in the Redis serialization protocol (RESP2, what a connection speaks until it sends
/// `HELLO 3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespValue {
    /// `+OK`
    Simple(String),
    /// `-ERR ...`
    Error(String),
    /// `:1`
    Integer(i64),
    /// `$3 foo`, or `$-1` (none)
    Bulk(Option<Vec<u8>>),
    /// `*2 ...`, or `*-1` (none)
    Array(Option<Vec<RespValue>>),
}

impl RespValue {
    /// The text of a simple string or of a UTF-8 bulk string.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Simple(s) => Some(s),
            Self::Bulk(Some(b)) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }
}

/// A minimal blocking Redis connection (std only, no client crate): for readiness checks and
/// for tests that look at what is stored in Redis behind the code under test.
#[derive(Debug)]
pub struct Resp {
    reader: BufReader<TcpStream>,
}

/// The largest bulk string or array a [`Resp`] reply may announce (a guard against garbage).
const RESP_MAX_LEN: usize = 64 << 20;

impl Resp {
    /// Connects to `addr` (1 s to connect, 5 s per read or write).
    ///
    /// # Errors
    ///
    /// When it cannot connect.
    pub fn connect(addr: SocketAddr) -> io::Result<Self> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        stream.set_write_timeout(Some(Duration::from_secs(5)))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(stream),
        })
    }

    /// Sends one command (each argument a bulk string) and reads its reply. An error reply
    /// is `Ok(RespValue::Error(..))`.
    ///
    /// # Errors
    ///
    /// I/O errors, timeouts, and a reply that is not RESP2.
    pub fn command(&mut self, args: &[&str]) -> io::Result<RespValue> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&out)?;
        self.read_value()
    }

    fn read_line(&mut self) -> io::Result<String> {
        let mut line = Vec::new();
        self.reader
            .by_ref()
            .take(RESP_MAX_LEN as u64)
            .read_until(b'\n', &mut line)?;
        if !line.ends_with(b"\r\n") {
            return Err(invalid("a RESP line without CRLF (connection closed?)"));
        }
        line.truncate(line.len() - 2);
        String::from_utf8(line).map_err(|_| invalid("a RESP line that is not UTF-8"))
    }

    fn read_value(&mut self) -> io::Result<RespValue> {
        let line = self.read_line()?;
        let (kind, rest) = line
            .split_at_checked(1)
            .ok_or_else(|| invalid("an empty line"))?;
        let length = |rest: &str| -> io::Result<Option<usize>> {
            let n: i64 = rest.parse().map_err(|_| invalid("a bad RESP length"))?;
            match usize::try_from(n) {
                Ok(n) if n <= RESP_MAX_LEN => Ok(Some(n)),
                Ok(_) => Err(invalid("a RESP length over the limit")),
                Err(_) if n == -1 => Ok(None),
                Err(_) => Err(invalid("a negative RESP length")),
            }
        };
        Ok(match kind {
            "+" => RespValue::Simple(rest.to_string()),
            "-" => RespValue::Error(rest.to_string()),
            ":" => RespValue::Integer(rest.parse().map_err(|_| invalid("a bad RESP integer"))?),
            "$" => match length(rest)? {
                None => RespValue::Bulk(None),
                Some(n) => {
                    let mut data = vec![0; n + 2];
                    self.reader.read_exact(&mut data)?;
                    if !data.ends_with(b"\r\n") {
                        return Err(invalid("a bulk string without CRLF"));
                    }
                    data.truncate(n);
                    RespValue::Bulk(Some(data))
                }
            },
            "*" => match length(rest)? {
                None => RespValue::Array(None),
                Some(n) => {
                    let mut items = Vec::with_capacity(n.min(1024));
                    for _ in 0..n {
                        items.push(self.read_value()?);
                    }
                    RespValue::Array(Some(items))
                }
            },
            _ => return Err(invalid("an unknown RESP type")),
        })
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

// ---------------------------------------------------------------------------------------------
// nginx
// ---------------------------------------------------------------------------------------------

/// nginx as a round-robin, non-sticky HTTP/1.1 load balancer on `127.0.0.1`, in front of
/// loopback upstreams; killed by PID when dropped.
///
/// Its configuration ([`nginx_conf`]): plain round robin (no `ip_hash`, `hash` or cookie: two
/// requests of one client, even on one connection, go to different upstreams), HTTP/1.1 to
/// the upstreams with keep-alive (`proxy_http_version 1.1`, `Connection ""`, `keepalive`), no
/// buffering either way (`proxy_buffering off`, `proxy_request_buffering off`: an SSE event
/// goes out when the upstream writes it), an hour of `proxy_read_timeout` for long-lived
/// streams, the client's `Host` forwarded (the servers' loopback `Host` check sees
/// `127.0.0.1:PORT`), no body size limit of its own (the servers' limits apply). An upstream
/// that refuses a connection is skipped for one second (`max_fails=1 fail_timeout=1s`) and
/// the request goes to the next one (nginx's default `proxy_next_upstream error timeout`,
/// which never re-sends a POST that reached an upstream).
#[derive(Debug)]
pub struct Nginx {
    process: Process,
    port: u16,
    upstreams: Vec<SocketAddr>,
    prefix: TempDir,
}

/// The path nginx answers itself with its prefix directory's name: its readiness check.
const NGINX_READY_PATH: &str = "/__mcp-tests-nginx-ready";

impl Nginx {
    /// Starts nginx on a free loopback port in front of `upstreams`, in that order.
    ///
    /// # Errors
    ///
    /// [`ServiceError::NotInstalled`] without `nginx`; [`ServiceError::Failed`] when there is
    /// no upstream, an upstream is not a loopback address, or nginx does not answer within
    /// [`READY_WITHIN`].
    pub fn round_robin(upstreams: &[SocketAddr]) -> Result<Self, ServiceError> {
        if upstreams.is_empty() {
            return Err(failed("nginx: no upstream"));
        }
        if let Some(a) = upstreams.iter().find(|a| !a.ip().is_loopback()) {
            return Err(failed(format!(
                "nginx: upstream {a} is not a loopback address"
            )));
        }
        let binary = locate("nginx", "nginx-light")?;
        let prefix = temp_dir("nginx")?;
        let token = prefix
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let (process, port) = on_a_free_port("nginx", |port| {
            spawn_nginx(&binary, port, prefix.path(), upstreams, &token).map(|p| (p, port))
        })?;
        Ok(Self {
            process,
            port,
            upstreams: upstreams.to_vec(),
            prefix,
        })
    }

    /// Its address, `127.0.0.1:PORT`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port).into()
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// The PID of its one process.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// The upstreams it balances, in their round-robin order.
    pub fn upstreams(&self) -> &[SocketAddr] {
        &self.upstreams
    }

    /// Its prefix directory (configuration, PID file, logs, temporary files).
    pub fn prefix(&self) -> &Path {
        self.prefix.path()
    }

    /// Its access log: one line per finished request, `METHOD URI STATUS UPSTREAM
    /// UPSTREAM_STATUS` (a request that went to two upstreams lists both, comma-separated).
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.prefix.path().join("access.log")).unwrap_or_default()
    }

    /// The end of its error log.
    pub fn error_log_tail(&self) -> String {
        tail(&self.prefix.path().join("error.log"), 40)
    }
}

/// The configuration of an [`Nginx`] listening on `127.0.0.1:port` with everything under
/// `prefix`; `token` is what the readiness path answers.
pub fn nginx_conf(prefix: &Path, port: u16, upstreams: &[SocketAddr], token: &str) -> String {
    let p = |name: &str| format!("\"{}\"", prefix.join(name).display());
    let servers: String = upstreams
        .iter()
        .map(|a| format!("        server {a} max_fails=1 fail_timeout=1s;\n"))
        .collect();
    format!(
        "# Written by mcp-tests (tests/src/services.rs) for one test; removed with it.
daemon off;
master_process off;
worker_processes 1;
pid {pid};
error_log {error_log} warn;
events {{
    worker_connections 1024;
}}
http {{
    log_format lb '$request_method $request_uri $status $upstream_addr $upstream_status';
    access_log {access_log} lb;
    client_body_temp_path {body};
    proxy_temp_path {proxy};
    fastcgi_temp_path {fastcgi};
    uwsgi_temp_path {uwsgi};
    scgi_temp_path {scgi};
    client_max_body_size 0;
    upstream mcp {{
{servers}        keepalive 32;
        keepalive_requests 100000;
        keepalive_timeout 60s;
    }}
    server {{
        listen 127.0.0.1:{port};
        location = {NGINX_READY_PATH} {{
            return 200 \"{token}\";
        }}
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header X-Forwarded-Host $host;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_cache off;
            proxy_connect_timeout 2s;
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
        }}
    }}
}}
",
        pid = p("nginx.pid"),
        error_log = p("error.log"),
        access_log = p("access.log"),
        body = p("client_body"),
        proxy = p("proxy"),
        fastcgi = p("fastcgi"),
        uwsgi = p("uwsgi"),
        scgi = p("scgi"),
    )
}

fn spawn_nginx(
    binary: &Path,
    port: u16,
    prefix: &Path,
    upstreams: &[SocketAddr],
    token: &str,
) -> Result<Process, Attempt> {
    let conf = prefix.join("nginx.conf");
    let error_log = prefix.join("error.log");
    std::fs::write(&conf, nginx_conf(prefix, port, upstreams, token))
        .map_err(|e| failed(format!("nginx: cannot write {}: {e}", conf.display())))?;
    let _ = std::fs::remove_file(&error_log);
    let stderr = File::create(prefix.join("stderr.log"))
        .map_err(|e| failed(format!("nginx: cannot create its stderr log: {e}")))?;
    let mut prefix_arg = prefix.as_os_str().to_owned();
    prefix_arg.push("/");
    let mut command = Command::new(binary);
    command
        .arg("-p")
        .arg(prefix_arg)
        .arg("-c")
        .arg(&conf)
        // The error log from the first line on (before the configuration names one).
        .arg("-e")
        .arg(&error_log)
        .stdout(Stdio::null())
        .stderr(stderr);
    let mut process = Process::spawn(&mut command, "nginx")?;
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
    wait_ready(&mut process, "nginx", &error_log, || {
        http_get_body(addr, NGINX_READY_PATH).is_ok_and(|body| body == token)
    })?;
    Ok(process)
}

/// `GET path` over HTTP/1.0 (one request, read to the end); the body of a 200 response.
fn http_get_body(addr: SocketAddr, path: &str) -> io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut response = String::new();
    stream.take(64 * 1024).read_to_string(&mut response)?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => Err(invalid("not a 200 response")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_never_handed_out_twice_and_never_ephemeral() {
        let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(32_768);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let port = free_loopback_port().unwrap();
            assert!(port < low, "{port} is in the ephemeral range (from {low})");
            assert!(seen.insert(port), "{port} handed out twice");
        }
    }

    #[test]
    fn a_missing_binary_is_not_installed_with_the_package_to_install() {
        let err = locate("mcp-tests-no-such-binary", "some-package").unwrap_err();
        assert!(matches!(err, ServiceError::NotInstalled { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            "mcp-tests-no-such-binary not installed (apt-get install some-package)"
        );
        // A binary every machine has is found (PATH or the fallbacks).
        assert!(find_binary("sh").is_some());
    }

    #[test]
    fn not_installed_skips_locally_and_fails_under_ci_and_a_failed_start_always_fails() {
        let missing = ServiceError::NotInstalled {
            binary: "redis-server",
            package: "redis-server",
        };
        unavailable_under(&missing, None);
        unavailable_under(&missing, Some("false"));
        let err = std::panic::catch_unwind(|| unavailable_under(&missing, Some("true")))
            .expect_err("CI=true: a missing service must fail the test");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("redis-server not installed (apt-get install redis-server)")
                && msg.contains("CI is set"),
            "{msg}"
        );
        let broken = ServiceError::Failed("nginx exited at start".into());
        assert!(std::panic::catch_unwind(|| unavailable_under(&broken, None)).is_err());
    }

    #[test]
    fn the_nginx_configuration_is_round_robin_unbuffered_http11_and_self_contained() {
        let prefix = Path::new("/tmp/mcp-tests-nginx-x");
        let ups: Vec<SocketAddr> = vec![
            "127.0.0.1:4001".parse().unwrap(),
            "127.0.0.1:4002".parse().unwrap(),
        ];
        let conf = nginx_conf(prefix, 4000, &ups, "tok");
        for needle in [
            "daemon off;",
            "server 127.0.0.1:4001 max_fails=1 fail_timeout=1s;",
            "server 127.0.0.1:4002 max_fails=1 fail_timeout=1s;",
            "keepalive 32;",
            "proxy_http_version 1.1;",
            "proxy_set_header Connection \"\";",
            "proxy_buffering off;",
            "proxy_read_timeout 3600s;",
            "listen 127.0.0.1:4000;",
            "return 200 \"tok\";",
        ] {
            assert!(conf.contains(needle), "missing {needle:?} in\n{conf}");
        }
        for sticky in ["ip_hash", "hash ", "sticky", "least_conn", "random"] {
            assert!(!conf.contains(sticky), "{sticky:?} in\n{conf}");
        }
        // Every path it writes is under its prefix.
        for line in conf.lines().filter(|l| l.contains('/') && l.contains('"')) {
            if let Some(path) = line.split('"').nth(1).filter(|s| s.starts_with('/')) {
                assert!(path.starts_with("/tmp/mcp-tests-nginx-x/"), "{line}");
            }
        }
    }

    #[test]
    fn nginx_refuses_no_upstream_and_upstreams_off_loopback_before_starting() {
        let err = Nginx::round_robin(&[]).unwrap_err();
        assert!(err.to_string().contains("no upstream"), "{err}");
        let err = Nginx::round_robin(&["192.0.2.1:80".parse().unwrap()]).unwrap_err();
        assert!(err.to_string().contains("not a loopback address"), "{err}");
    }

    #[test]
    fn resp_replies_are_parsed_from_a_byte_stream() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n");
            s.write_all(b"*4\r\n$2\r\nhi\r\n:-7\r\n$-1\r\n-ERR no\r\n")
                .unwrap();
        });
        let mut conn = Resp::connect(addr).unwrap();
        let reply = conn.command(&["ECHO", "hi"]).unwrap();
        assert_eq!(
            reply,
            RespValue::Array(Some(vec![
                RespValue::Bulk(Some(b"hi".to_vec())),
                RespValue::Integer(-7),
                RespValue::Bulk(None),
                RespValue::Error("ERR no".into()),
            ]))
        );
        server.join().unwrap();
        // The peer closed: the next read is an error, not a hang.
        assert!(conn.command(&["PING"]).is_err());
    }
}
