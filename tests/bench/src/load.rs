//! The load phases: echo calls over concurrent sessions, and sessions opened in a loop.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::client::{Conn, Session, Target, Wrong, call_echo, open_session};

/// What one load phase measured.
#[derive(Debug, Default, Clone)]
pub struct LoadRun {
    /// Calls made (answered rightly or not).
    pub calls: u64,
    /// Wrong replies.
    pub errors: u64,
    /// The first wrong reply.
    pub first_error: Option<String>,
    /// The wall time of the phase.
    pub elapsed: Duration,
    /// The latency of each right reply, µs.
    pub latencies_us: Vec<u64>,
    /// Server CPU over the phase, in nanoseconds (filled in by the caller).
    pub cpu_ns: u64,
}

impl LoadRun {
    /// Calls per second.
    pub fn rps(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64()
    }

    /// [`cpu_ns`](Self::cpu_ns) per call, µs.
    pub fn cpu_us_per_call(&self) -> f64 {
        self.cpu_ns as f64 / 1e3 / self.calls.max(1) as f64
    }

    /// The `p` quantile (0..=1) of the latencies, µs (NaN without any).
    pub fn percentile(&mut self, p: f64) -> f64 {
        percentile(&mut self.latencies_us, p)
    }
}

/// The `p` quantile (0..=1) of `values` (sorted in place); NaN when empty.
pub fn percentile(values: &mut [u64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_unstable();
    let i = ((values.len() - 1) as f64 * p).round() as usize;
    values[i] as f64
}

/// The median of `v` (NaN when empty).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `calls` echo calls in total over `sessions`, one worker each (so as many in flight as
/// sessions), ids from `next_id`. Returns the run (without CPU) and the sessions.
///
/// # Errors
///
/// When a worker task fails (a wrong reply is counted, not an error).
pub async fn load(
    sessions: Vec<Session>,
    calls: u64,
    next_id: &Arc<AtomicU64>,
) -> Result<(LoadRun, Vec<Session>), String> {
    let left = Arc::new(AtomicU64::new(calls));
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
    Ok((run, back))
}

/// Opens `n` sessions concurrently, each on its own new connection.
///
/// # Errors
///
/// The first session that fails to open.
pub async fn open_sessions(target: &Target, n: usize) -> Result<Vec<Session>, String> {
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

/// What [`open_many`] did.
#[derive(Debug, Default, Clone)]
pub struct Opened {
    /// Sessions opened rightly.
    pub opened: u64,
    /// Sessions that failed to open.
    pub failures: u64,
    /// The first failure.
    pub first_error: Option<Wrong>,
    /// The wall time.
    pub elapsed: Duration,
    /// The sessions' ids, when asked for.
    pub ids: Vec<String>,
}

/// Opens `n` sessions (initialize + notifications/initialized) over `connections`
/// keep-alive connections, sequentially on each (so `connections` in flight), and leaves
/// them open; the connections are closed at the end. With `keep_ids`, their ids are
/// returned.
///
/// # Errors
///
/// When a connection cannot be opened.
pub async fn open_many(
    target: &Target,
    n: usize,
    connections: usize,
    keep_ids: bool,
) -> Result<Opened, String> {
    let left = Arc::new(AtomicUsize::new(n));
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..connections.clamp(1, n.max(1)) {
        let target = target.clone();
        let left = left.clone();
        set.spawn(async move {
            let mut conn: Option<Conn> = Some(Conn::open(&target).await?);
            let mut done = Opened::default();
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                match open_session(&target, conn.take()).await {
                    Ok(s) => {
                        done.opened += 1;
                        if keep_ids {
                            done.ids.push(s.id);
                        }
                        conn = Some(s.conn);
                    }
                    Err(e) => {
                        done.failures += 1;
                        done.first_error.get_or_insert(e);
                    }
                }
            }
            Ok::<Opened, String>(done)
        });
    }
    let mut all = Opened::default();
    while let Some(r) = set.join_next().await {
        let done = r.map_err(|e| e.to_string())??;
        all.opened += done.opened;
        all.failures += done.failures;
        all.ids.extend(done.ids);
        if all.first_error.is_none() {
            all.first_error = done.first_error;
        }
    }
    all.elapsed = t0.elapsed();
    Ok(all)
}
