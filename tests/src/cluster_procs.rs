//! Several `mcp-everything` **processes** sharing one Redis behind an nginx round-robin load
//! balancer: the deployment the README's "Running several instances" recipe describes, with
//! real process boundaries, so that an instance can be killed with `SIGKILL` and started
//! again mid-run.
//!
//! [`ProcessCluster::start`] starts a [`Redis`], `n` instances (`--store redis://… --instance
//! <letter>` on fixed free loopback ports) and an [`Nginx`] in front of them. Every process is
//! a child of the caller, stopped by PID when the cluster is dropped (panic included). An
//! instance's stdout and stderr go to a file in the cluster's temporary directory; it is ready
//! when its banner (`… on http://…`) is there. [`ProcessCluster::kill`] sends `SIGKILL` (no
//! shutdown, no goodbye to Redis: its liveness key expires on its own) and
//! [`ProcessCluster::restart`] starts the same name on the same port: the driver gives it a
//! new incarnation, so it mints no id of its previous life.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::runtime::Runtime;
use crate::services::{Nginx, Redis, ServiceError, free_loopback_port};

/// How long an instance may take to print its banner.
pub const INSTANCE_READY_WITHIN: Duration = Duration::from_secs(20);

/// One instance process.
struct Instance {
    name: String,
    port: u16,
    child: Option<Child>,
    log: PathBuf,
    starts: usize,
}

impl Instance {
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGKILL: nothing is flushed or said goodbye to.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `n` instances of `mcp-everything` on one Redis behind nginx (see the module docs).
pub struct ProcessCluster {
    instances: Vec<Instance>,
    exe: PathBuf,
    runtime: Runtime,
    extra: Vec<String>,
    // Dropped after the instances (fields drop in order): nginx, then Redis, then the logs.
    lb: Nginx,
    redis: Redis,
    dir: TempDir,
}

impl ProcessCluster {
    /// Starts Redis, `n` instances of `exe` (the `mcp-everything` binary) on `runtime` with
    /// `extra` arguments each, and nginx in front of them.
    ///
    /// # Errors
    ///
    /// [`ServiceError::NotInstalled`] without redis-server or nginx (for `require_service!`);
    /// [`ServiceError::Failed`] when something does not start.
    pub fn start(
        exe: &Path,
        runtime: Runtime,
        n: usize,
        extra: &[&str],
    ) -> Result<ProcessCluster, ServiceError> {
        let redis = Redis::start()?;
        let dir = tempfile::Builder::new()
            .prefix("mcp-tests-cluster-")
            .tempdir()
            .map_err(|e| ServiceError::Failed(format!("cluster: temporary directory: {e}")))?;
        let mut instances = Vec::with_capacity(n);
        for i in 0..n {
            let port = free_loopback_port()
                .map_err(|e| ServiceError::Failed(format!("cluster: a free port: {e}")))?;
            let name = char::from(b'a' + u8::try_from(i % 26).unwrap_or(0)).to_string();
            instances.push(Instance {
                log: dir.path().join(format!("{name}.log")),
                name,
                port,
                child: None,
                starts: 0,
            });
        }
        let upstreams: Vec<SocketAddr> = instances
            .iter()
            .map(|i| SocketAddrV4::new(Ipv4Addr::LOCALHOST, i.port).into())
            .collect();
        let mut cluster = ProcessCluster {
            instances,
            exe: exe.to_owned(),
            runtime,
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            // nginx checks nothing of its upstreams at start: it can come first.
            lb: Nginx::round_robin(&upstreams)?,
            redis,
            dir,
        };
        for i in 0..n {
            cluster.launch(i)?;
        }
        Ok(cluster)
    }

    /// The cluster's endpoint, through nginx: `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("{}/mcp", self.lb.url())
    }

    /// Instance `i`'s own endpoint (bypassing nginx).
    pub fn instance_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}/mcp", self.instances[i].port)
    }

    /// Instance `i`'s address.
    pub fn instance_addr(&self, i: usize) -> SocketAddr {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.instances[i].port).into()
    }

    /// How many instances there are.
    pub fn len(&self) -> usize {
        self.instances.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.instances.is_empty()
    }

    /// The Redis they share.
    pub fn redis(&self) -> &Redis {
        &self.redis
    }

    /// Instance `i`'s PID, `None` while it is killed.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.instances[i].child.as_ref().map(Child::id)
    }

    /// Kills instance `i` with `SIGKILL` and reaps it.
    pub fn kill(&mut self, i: usize) {
        self.instances[i].stop();
    }

    /// Starts instance `i` again (same name, port and arguments), killing it first if it runs.
    ///
    /// # Errors
    ///
    /// [`ServiceError::Failed`] when it does not print its banner in time.
    pub fn restart(&mut self, i: usize) -> Result<(), ServiceError> {
        self.instances[i].stop();
        self.launch(i)
    }

    /// Every instance's log and nginx's, for a failing test's message.
    pub fn logs(&self) -> String {
        let mut out = format!(
            "--- nginx error log\n{}\n--- nginx access log\n{}\n",
            self.lb.error_log_tail(),
            self.lb.access_log()
        );
        for i in &self.instances {
            let text = std::fs::read_to_string(&i.log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(30);
            out.push_str(&format!(
                "--- instance {} (port {}, started {} times)\n{}\n",
                i.name,
                i.port,
                i.starts,
                lines[from..].join("\n")
            ));
        }
        out
    }

    fn launch(&mut self, i: usize) -> Result<(), ServiceError> {
        let url = self.redis.url();
        let inst = &mut self.instances[i];
        let log = File::options()
            .create(true)
            .append(true)
            .open(&inst.log)
            .map_err(|e| ServiceError::Failed(format!("{}: {e}", inst.log.display())))?;
        let err = log
            .try_clone()
            .map_err(|e| ServiceError::Failed(format!("{}: {e}", inst.log.display())))?;
        let before = std::fs::metadata(&inst.log).map_or(0, |m| m.len());
        let child = Command::new(&self.exe)
            .arg("--runtime")
            .arg(self.runtime.name())
            .arg("--bind")
            .arg(format!("127.0.0.1:{}", inst.port))
            .arg("--store")
            .arg(&url)
            .arg("--instance")
            .arg(&inst.name)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| ServiceError::Failed(format!("cannot run {}: {e}", self.exe.display())))?;
        inst.child = Some(child);
        inst.starts += 1;
        let until = Instant::now() + INSTANCE_READY_WITHIN;
        loop {
            let text = std::fs::read(&inst.log).unwrap_or_default();
            let fresh = String::from_utf8_lossy(&text[usize::try_from(before).unwrap_or(0)..]);
            if fresh.contains(" on http://") {
                return Ok(());
            }
            if let Some(child) = inst.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                inst.child = None;
                return Err(ServiceError::Failed(format!(
                    "instance {} exited ({status}) before serving:\n{fresh}",
                    inst.name
                )));
            }
            if Instant::now() >= until {
                inst.stop();
                return Err(ServiceError::Failed(format!(
                    "instance {} printed no banner within {INSTANCE_READY_WITHIN:?}:\n{fresh}",
                    inst.name
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The cluster's temporary directory (instance logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for ProcessCluster {
    fn drop(&mut self) {
        for i in &mut self.instances {
            i.stop();
        }
    }
}

// ---- the kill ledgers ------------------------------------------------------------------

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use mcp_proto::client::{ClientConfig, ClientError};
use mcp_service::PeerError;
use mcp_service::client::{
    Client as ServiceClient, RequestError, RequestOptions, ServerNotification,
};
use serde_json::json;

use crate::faults::{Faults, Ledger, Proxy, Workload};

/// The message of the JSON-RPC error a request gets when the instance running it died.
pub const OWNER_GONE: &str = "stopped before answering";

/// What a kill ledger saw: the [`Ledger`] (0 lost, 0 duplicated, 0 hung…) and the kills.
#[derive(Debug, Default)]
pub struct KillLedger {
    /// The counts, as in the fault-injection suite.
    pub ledger: Ledger,
    /// Calls that ended with the error of a request whose instance died ([`OWNER_GONE`]);
    /// what they delivered before is checked: in order, no gap, no duplicate.
    pub died: usize,
    /// Instances killed (`SIGKILL`) and started again during the run.
    pub kills: usize,
    /// Calls (or bursts) a kill fell into.
    pub hit: usize,
}

impl KillLedger {
    /// The invariants: nothing lost, duplicated or hung; no error but the death of a call a
    /// kill fell into (or its interruption before any event); one POST per call; at most a
    /// few GETs per kill (no reconnect storm); nothing left open; and the kills happened.
    ///
    /// # Errors
    ///
    /// Every invariant broken, described.
    pub fn check(&self, kills: usize) -> Result<(), String> {
        let l = &self.ledger;
        let mut bad = Vec::new();
        if l.lost > 0 {
            bad.push(format!("{} lost", l.lost));
        }
        if l.duplicated > 0 {
            bad.push(format!("{} duplicated", l.duplicated));
        }
        if l.hung > 0 {
            bad.push(format!("{} hung", l.hung));
        }
        if !l.errors.is_empty() {
            bad.push(format!("errors: {:?}", l.errors));
        }
        if self.died + l.interrupted > self.hit {
            bad.push(format!(
                "{} calls died or were interrupted, but kills fell into {}",
                self.died + l.interrupted,
                self.hit
            ));
        }
        if l.posted_calls != l.calls {
            bad.push(format!(
                "{} tools/call POSTs for {} calls (a silent re-send?)",
                l.posted_calls, l.calls
            ));
        }
        // The listen stream once, then per kill at most: its reconnect, a resume of the call
        // the kill fell into, and one retry of each.
        if l.gets > 1 + 4 * self.kills {
            bad.push(format!("{} GETs for {} kills", l.gets, self.kills));
        }
        if l.open_after_close > 0 {
            bad.push(format!("{} responses open after close", l.open_after_close));
        }
        if self.kills != kills {
            bad.push(format!("{} kills done of {kills}", self.kills));
        }
        if bad.is_empty() {
            Ok(())
        } else {
            Err(bad.join("; "))
        }
    }
}

impl std::fmt::Display for KillLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}; died {}, kills {}, calls hit {}",
            self.ledger, self.died, self.kills, self.hit
        )
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts what a call a kill fell into delivered: 1..k in order, once each (a gap is a loss,
/// since events are committed in order and replayed from the store).
fn tally_prefix(ledger: &mut Ledger, seen: &[u64]) {
    let unique: BTreeSet<u64> = seen.iter().copied().collect();
    let top = unique.iter().next_back().copied().unwrap_or(0);
    ledger.lost += top - unique.len() as u64;
    ledger.duplicated += seen.len() as u64 - unique.len() as u64;
}

/// A request whose instance died before it answered anything: its stream was cut before
/// any event id (nothing to resume), or the load balancer answered 502 (the upstream
/// closed before a response head; nginx never re-sends a POST that reached an upstream).
fn died_before_answering(e: &PeerError) -> bool {
    match e {
        PeerError::Interrupted(_) => true,
        PeerError::Client(ClientError::HttpStatus { status, .. }) => {
            *status == http::StatusCode::BAD_GATEWAY
        }
        _ => false,
    }
}

/// Kills the instance with the PID it receives (or, for [`Victim::Each`], every instance in
/// turn), restarts it after `down`, counting kills.
struct Killer {
    /// When each kill was done.
    at: Arc<Mutex<Vec<Instant>>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

/// Whom the killer kills.
enum Victim {
    /// The instance whose PID arrives on the channel (once).
    ByPid(mpsc::Receiver<u32>),
    /// Every instance in turn, `gap` apart, starting after `gap`.
    Each { gap: Duration },
}

impl Killer {
    fn start(cluster: Arc<Mutex<ProcessCluster>>, victim: Victim, down: Duration) -> Killer {
        let at = Arc::new(Mutex::new(Vec::new()));
        let times = at.clone();
        let thread = std::thread::spawn(move || -> Result<(), String> {
            let kill_restart = |i: usize| -> Result<(), String> {
                lock(&cluster).kill(i);
                lock(&times).push(Instant::now());
                std::thread::sleep(down);
                lock(&cluster)
                    .restart(i)
                    .map_err(|e| format!("restart of instance {i}: {e}"))
            };
            match victim {
                Victim::ByPid(rx) => {
                    let Ok(pid) = rx.recv_timeout(Duration::from_secs(60)) else {
                        return Ok(());
                    };
                    let found = {
                        let c = lock(&cluster);
                        (0..c.len()).find(|&i| c.pid(i) == Some(pid))
                    };
                    match found {
                        Some(i) => kill_restart(i),
                        None => Err(format!("no instance has PID {pid}")),
                    }
                }
                Victim::Each { gap } => {
                    let n = lock(&cluster).len();
                    for i in 0..n {
                        std::thread::sleep(gap);
                        kill_restart(i)?;
                    }
                    Ok(())
                }
            }
        });
        Killer {
            at,
            thread: Some(thread),
        }
    }

    /// Whether a kill fell into a call that started at `started` and just ended, or came
    /// less than a second before it: nginx may still send a request to a killed instance on
    /// a pooled connection whose close it has not yet noticed (it then answers 502).
    fn hit(&self, started: Instant) -> bool {
        let since = started
            .checked_sub(Duration::from_secs(1))
            .unwrap_or(started);
        lock(&self.at).iter().any(|t| *t >= since)
    }

    fn kills(&self) -> usize {
        lock(&self.at).len()
    }

    fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    fn join(&mut self) -> Result<(), String> {
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err("the killer thread panicked".into()),
            None => Ok(()),
        }
    }
}

/// Connects our client on `client` to `cluster` through a counting (never cutting) proxy.
async fn connect(
    client: Runtime,
    cluster: &Arc<Mutex<ProcessCluster>>,
    listen: bool,
) -> Result<(crate::runtime::Client, Proxy), String> {
    let lb = lock(cluster).lb.addr();
    let proxy = Proxy::start(lb, Faults::none())
        .await
        .map_err(|e| format!("proxy: {e}"))?;
    let builder = ServiceClient::builder("mcp-cluster-ledger", "1");
    let cc = ClientConfig::new().with_continuous_listening(listen);
    let c = client
        .connect_with(&proxy.url("/mcp"), builder, cc)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    Ok((c, proxy))
}

/// Closes the client, then waits (2 s at most) until the proxy sees every response end.
async fn close(c: crate::runtime::Client, proxy: &Proxy, ledger: &mut Ledger) {
    c.close().await;
    let until = Instant::now() + Duration::from_secs(2);
    while proxy.open_responses() > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ledger.open_after_close = proxy.open_responses();
    ledger.finish(proxy);
}

/// The request-stream ledger with a kill: sequential `ledger_count` calls through nginx;
/// at the first progress of call `victim_call`, the instance running it (the PID in the
/// progress message) is killed and, `down` later, started again. At least
/// `w.rounds` calls, and as many more as it takes the killer to finish.
///
/// # Errors
///
/// When the client cannot connect, or the killer could not restart the instance.
pub async fn post_kill_ledger(
    client: Runtime,
    cluster: Arc<Mutex<ProcessCluster>>,
    w: Workload,
    victim_call: usize,
    down: Duration,
) -> Result<KillLedger, String> {
    let (c, proxy) = connect(client, &cluster, false).await?;
    let (tx, rx) = mpsc::channel();
    let mut killer = Killer::start(cluster.clone(), Victim::ByPid(rx), down);
    let mut out = KillLedger::default();
    let service = c.client().clone();
    let mut call = 0;
    while (call < w.rounds || !killer.finished()) && call < w.rounds + 200 {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (s2, tx2) = (seen.clone(), (call == victim_call).then(|| tx.clone()));
        let sent = Mutex::new(false);
        let options = RequestOptions::new().on_progress(move |p| {
            if let Some(v) = p.progress.as_u64() {
                lock(&s2).push(v);
            }
            let pid = p.message.as_deref().and_then(|m| m.strip_prefix("pid "));
            if let (Some(tx), Some(pid)) = (&tx2, pid.and_then(|p| p.parse().ok()))
                && !std::mem::replace(&mut *lock(&sent), true)
            {
                let _ = tx.send(pid);
            }
        });
        let started = Instant::now();
        let args = json!({"n": w.n, "interval_ms": w.interval_ms});
        let outcome = tokio::time::timeout(
            w.timeout,
            service.call_tool_with("ledger_count", args, options),
        )
        .await;
        let hit = killer.hit(started) || call == victim_call;
        out.hit += usize::from(hit);
        out.ledger.calls += 1;
        let seen = lock(&seen).clone();
        match outcome {
            Err(_) => out.ledger.hung += 1,
            Ok(Ok(result)) => {
                let text = result.first_text().unwrap_or_default().to_owned();
                if text != format!("counted {}", w.n) {
                    out.ledger
                        .errors
                        .push(format!("call {call}: result {text:?}"));
                } else if crate::faults::tally(&mut out.ledger, &seen, w.n) {
                    out.ledger.ok += 1;
                }
            }
            Ok(Err(RequestError::Rpc { message, .. })) if hit && message.contains(OWNER_GONE) => {
                out.died += 1;
                tally_prefix(&mut out.ledger, &seen);
            }
            Ok(Err(RequestError::Transport(e))) if hit && died_before_answering(&e) => {
                out.ledger.interrupted += 1;
                tally_prefix(&mut out.ledger, &seen);
            }
            Ok(Err(e)) => out.ledger.errors.push(format!("call {call}: {e}")),
        }
        call += 1;
    }
    drop(tx);
    let joined = killer.join();
    out.kills = killer.kills();
    close(c, &proxy, &mut out.ledger).await;
    joined.map(|()| out)
}

/// The GET-stream ledger with a rolling restart: `ledger_burst` calls (log messages on the
/// GET stream) through nginx while every instance in turn is killed and, `down` later,
/// started again (`gap` between kills); each burst must arrive whole, exactly once — except
/// a burst whose instance a kill fell into, which must arrive as a prefix, once.
///
/// # Errors
///
/// When the client cannot connect or listen, or the killer could not restart an instance.
pub async fn get_kill_ledger(
    client: Runtime,
    cluster: Arc<Mutex<ProcessCluster>>,
    w: Workload,
    gap: Duration,
    down: Duration,
) -> Result<KillLedger, String> {
    let (c, proxy) = connect(client, &cluster, true).await?;
    if tokio::time::timeout(w.timeout, c.client().listen_opened()).await != Ok(true) {
        return Err("the GET stream did not open".into());
    }
    let service = c.client().clone();
    let mut notifications = service.notifications();
    let mut seen: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    let record = |n: ServerNotification, seen: &mut BTreeMap<i64, Vec<u64>>| {
        if let ServerNotification::Log(log) = n
            && let (Some(b), Some(s)) = (log.data["burst"].as_i64(), log.data["seq"].as_u64())
        {
            seen.entry(b).or_default().push(s);
        }
    };
    let mut killer = Killer::start(cluster.clone(), Victim::Each { gap }, down);
    let mut out = KillLedger::default();
    let mut partial = BTreeSet::new();
    let mut burst = 0i64;
    while (burst < i64::try_from(w.rounds).unwrap_or(i64::MAX) || !killer.finished()) && burst < 500
    {
        let started = Instant::now();
        out.ledger.calls += 1;
        let args = json!({"burst": burst, "n": w.n, "interval_ms": w.interval_ms});
        let outcome =
            tokio::time::timeout(w.timeout, service.call_tool("ledger_burst", args)).await;
        let hit = killer.hit(started);
        out.hit += usize::from(hit);
        match outcome {
            Err(_) => out.ledger.hung += 1,
            Ok(Ok(_)) => {}
            Ok(Err(RequestError::Rpc { message, .. })) if hit && message.contains(OWNER_GONE) => {
                out.died += 1;
                partial.insert(burst);
            }
            Ok(Err(RequestError::Transport(e))) if hit && died_before_answering(&e) => {
                out.ledger.interrupted += 1;
                partial.insert(burst);
            }
            Ok(Err(e)) => out.ledger.errors.push(format!("burst {burst}: {e}")),
        }
        // A whole burst is awaited (a partial one for a short while: what it committed).
        let want = if partial.contains(&burst) { 0 } else { w.n };
        let until = Instant::now()
            + if want == 0 {
                Duration::from_millis(500)
            } else {
                w.timeout
            };
        loop {
            for n in notifications.drain() {
                record(n, &mut seen);
            }
            let have = seen.get(&burst).map_or(0, Vec::len) as u64;
            if (want > 0 && have >= want) || Instant::now() >= until {
                break;
            }
            if let Ok(Some(n)) =
                tokio::time::timeout(Duration::from_millis(50), notifications.next()).await
            {
                record(n, &mut seen);
            }
        }
        burst += 1;
    }
    let joined = killer.join();
    out.kills = killer.kills();
    // Late duplicates count too.
    tokio::time::sleep(w.retry + Duration::from_millis(500)).await;
    for n in notifications.drain() {
        record(n, &mut seen);
    }
    for b in 0..burst {
        let got = seen.remove(&b).unwrap_or_default();
        if partial.contains(&b) {
            tally_prefix(&mut out.ledger, &got);
        } else if crate::faults::tally(&mut out.ledger, &got, w.n) {
            out.ledger.ok += 1;
        }
    }
    close(c, &proxy, &mut out.ledger).await;
    joined.map(|()| out)
}
