//! `mcp-faults`: the fault-injection suite (`mcp_tests::faults`) at the size of the issue
//! that asked for it — our client and our server on every runtime pair, through the cutting
//! proxy — as a table, exiting 1 if any row breaks an invariant (0 lost, 0 duplicated, 0
//! hung, every call within its bound, one POST per call, no GET storm, nothing open after
//! close).
//!
//! ```text
//! mcp-faults            the CI size (≈ 1.5 minutes on 2 cores)
//! mcp-faults --soak     the issue's full workload: 50 calls of 200 progress 5 ms apart, 20
//!                       bursts of 200, server retry 3 s (tens of minutes)
//! mcp-faults --seed N   another seed (default 1)
//! mcp-faults --only S   only the rows whose workload name contains S (e.g. "early")
//! mcp-faults peer <post|get> <tokio|smol> [--early] -- <command…>
//!                       a peer SDK's client (the command, given the proxy URL, kind, rounds, n,
//!                       interval_ms, timeout_ms; it prints READY once connected and RESULT
//!                       {json} at the end) against our server on that runtime, through the proxy
//!                       (MCP_FAULTS_LOG=<file> writes the proxy's request log there)
//! mcp-faults against <post|get> <tokio|smol> [--early] -- <command…>
//!                       our client on that runtime against a peer's server (the command prints
//!                       a line ending in "on <url>"), through the proxy
//! ```

use std::process::ExitCode;
use std::time::Duration;

use mcp_tests::faults::{Faults, Kind, Ledger, Proxy, Workload, run_ours};
use mcp_tests::runtime::Runtime;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("peer") => return peer(&args[1..], false),
        Some("against") => return peer(&args[1..], true),
        _ => {}
    }
    let soak = args.iter().any(|a| a == "--soak");
    let seed = seed_of(&args);
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_default();
    let (post, get) = if soak {
        let retry = Duration::from_secs(3);
        (
            Workload {
                rounds: 50,
                n: 200,
                interval_ms: 5,
                retry,
                timeout: Duration::from_secs(30),
            },
            Workload {
                rounds: 20,
                n: 200,
                interval_ms: 5,
                retry,
                timeout: Duration::from_secs(30),
            },
        )
    } else {
        let retry = Duration::from_millis(300);
        (
            Workload {
                rounds: 20,
                n: 200,
                interval_ms: 1,
                retry,
                timeout: Duration::from_secs(10),
            },
            Workload {
                rounds: 8,
                n: 200,
                interval_ms: 2,
                retry,
                timeout: Duration::from_secs(10),
            },
        )
    };
    // The CI size is short: cuts come denser (within 20 KB; the GET stream's at 0.5) so that
    // every row is cut (a row nothing cut fails); the soak keeps 0.3 anywhere in 40 KB.
    let (post_cuts, get_cuts) = if soak {
        (Faults::cuts(seed, 0.3), Faults::cuts(seed + 2, 0.3))
    } else {
        (
            Faults::cuts(seed, 0.3).within(20_000),
            Faults::cuts(seed + 2, 0.5).within(20_000),
        )
    };
    let rows: [(&str, Kind, Faults, Workload); 3] = [
        ("request stream, cuts", Kind::Post, post_cuts, post),
        (
            "request stream, early cuts, fragmented",
            Kind::Post,
            Faults::early_cuts(seed + 1, 0.3).fragmented(),
            post,
        ),
        ("GET bursts, cuts", Kind::Get, get_cuts, get),
    ];
    let pairs = [
        (Runtime::Tokio, Runtime::Tokio),
        (Runtime::Smol, Runtime::Tokio),
        (Runtime::Tokio, Runtime::Smol),
        (Runtime::Smol, Runtime::Smol),
    ];
    let Some(rt) = tokio_runtime() else {
        return ExitCode::FAILURE;
    };
    println!(
        "| workload | server ← client | calls ok / hung / interrupted / err | lost | duplicated | cuts | GETs | verdict |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---|");
    let mut failed = 0;
    for (name, kind, faults, w) in rows.into_iter().filter(|r| r.0.contains(&only)) {
        for (i, (server, client)) in pairs.into_iter().enumerate() {
            let faults = Faults {
                seed: faults.seed * 10 + i as u64,
                ..faults
            };
            let started = std::time::Instant::now();
            let outcome = rt.block_on(run_ours(server, client, kind, faults, w));
            let (cells, verdict) = match outcome {
                Ok(l) => {
                    let verdict = match (l.check(), l.cuts) {
                        (_, 0) => Err("nothing was cut".to_owned()),
                        (r, _) => r,
                    };
                    (
                        format!(
                            "{} / {} / {} / {} | {} | {} | {} | {}",
                            l.ok,
                            l.hung,
                            l.interrupted,
                            l.errors.len(),
                            l.lost,
                            l.duplicated,
                            l.cuts,
                            l.gets
                        ),
                        verdict,
                    )
                }
                Err(e) => ("— | — | — | — | —".to_owned(), Err(e)),
            };
            let verdict = match verdict {
                Ok(()) => format!("ok ({:.1} s)", started.elapsed().as_secs_f64()),
                Err(e) => {
                    failed += 1;
                    format!("**FAILED**: {e}")
                }
            };
            println!(
                "| {name} | {} ← {} | {cells} | {verdict} |",
                server.name(),
                client.name()
            );
        }
    }
    if failed > 0 {
        eprintln!("mcp-faults: {failed} row(s) failed");
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `mcp-faults peer …`: one row for a peer's client against our server; with `against`, our
/// client against a peer's server.
fn peer(args: &[String], against: bool) -> ExitCode {
    let usage = "usage: mcp-faults <peer|against> <post|get> <tokio|smol> [--early] [--seed N] -- <command…>";
    let Some(split) = args.iter().position(|a| a == "--") else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let (opts, command) = (&args[..split], &args[split + 1..]);
    let kind = match opts.first().map(String::as_str) {
        Some("post") => Kind::Post,
        Some("get") => Kind::Get,
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let runtime = match opts.get(1).map(String::as_str) {
        Some("tokio") => Runtime::Tokio,
        Some("smol") => Runtime::Smol,
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let early = opts.iter().any(|a| a == "--early");
    let seed = seed_of(opts);
    let Some((program, rest)) = command.split_first() else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let w = Workload {
        rounds: if kind == Kind::Post { 20 } else { 8 },
        n: 200,
        interval_ms: if kind == Kind::Post { 1 } else { 2 },
        retry: Duration::from_millis(300),
        timeout: Duration::from_secs(10),
    };
    let faults = match (early, kind) {
        (true, _) => Faults::early_cuts(seed, 0.3),
        (false, Kind::Post) => Faults::cuts(seed, 0.3).within(20_000),
        (false, Kind::Get) => Faults::cuts(seed, 0.5).within(20_000),
    };
    let Some(rt) = tokio_runtime() else {
        return ExitCode::FAILURE;
    };
    let outcome = if against {
        rt.block_on(against_peer(program, rest, runtime, kind, faults, w))
    } else {
        rt.block_on(async {
            let config = mcp_proto::server::ServerConfig::default().with_retry_interval(w.retry);
            let serving = runtime
                .serve(mcp_tests::everything::server(), config)
                .await
                .map_err(|e| format!("serve: {e}"))?;
            let proxy = Proxy::start(serving.local_addr(), faults)
                .await
                .map_err(|e| format!("proxy: {e}"))?;
            let ledger = run_peer(&proxy, program, rest, kind, w).await;
            serving.shutdown().await;
            ledger
        })
    };
    let what = match (kind, early) {
        (Kind::Post, false) => "request stream, cuts",
        (Kind::Post, true) => "request stream, early cuts",
        (Kind::Get, _) => "GET bursts, cuts",
    };
    match outcome {
        Ok(l) => {
            let verdict = match (l.check(), l.cuts) {
                (_, 0) => Err("nothing was cut".to_owned()),
                (r, _) => r,
            };
            let who = format!("{program} {}", rest.first().map_or("", String::as_str));
            let (server, client) = if against {
                (who, runtime.name().to_owned())
            } else {
                (runtime.name().to_owned(), who)
            };
            let mut peer_notes = String::new();
            if l.unsent > 0 {
                peer_notes += &format!(" + {} never sent by the peer after it", l.unsent);
            }
            if l.re_requested > 0 {
                peer_notes += &format!(
                    " + {} duplicates the peer asked for again from a stale Last-Event-ID",
                    l.re_requested
                );
            }
            if l.peer_silent > 0 {
                peer_notes +=
                    &format!(" + {} hung on a resume the peer left silent", l.peer_silent);
            }
            if l.priming_ignored > 0 {
                peer_notes += &format!(
                    " + {} cut after the priming id, which the peer ignores",
                    l.priming_ignored
                );
            }
            println!(
                "| {what} | {server} ← {client} | {} / {} / {} (unresumable cut){} / {} | {} | {} | {} | {} | {} |",
                l.ok,
                l.hung,
                l.interrupted,
                peer_notes,
                l.errors.len(),
                l.lost,
                l.duplicated,
                l.cuts,
                l.gets,
                match &verdict {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => format!("**FAILED**: {e}"),
                }
            );
            if verdict.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("mcp-faults peer: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the peer's client command through `proxy`; merges its RESULT with the proxy's log.
async fn run_peer(
    proxy: &Proxy,
    program: &str,
    rest: &[String],
    kind: Kind,
    w: Workload,
) -> Result<Ledger, String> {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        .arg(proxy.url("/mcp"))
        .arg(if kind == Kind::Post { "post" } else { "get" })
        .arg(w.rounds.to_string())
        .arg(w.n.to_string())
        .arg(w.interval_ms.to_string())
        .arg(w.timeout.as_millis().to_string())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn {program}: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let limit = (w.timeout + Duration::from_secs(3)) * u32::try_from(w.rounds + 2).unwrap_or(1000);
    let mut result = None;
    let read = async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line == "READY" {
                proxy.enable(true);
            } else if let Some(json) = line.strip_prefix("RESULT ") {
                result = serde_json::from_str::<serde_json::Value>(json).ok();
            } else {
                eprintln!("peer: {line}");
            }
        }
    };
    if tokio::time::timeout(limit, read).await.is_err() {
        return Err("the peer client did not finish".into());
    }
    proxy.enable(false);
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    let r = result.ok_or("the peer client printed no RESULT")?;
    if let Some(fatal) = r.get("fatal") {
        return Err(format!("peer client: {fatal}"));
    }
    let until = std::time::Instant::now() + Duration::from_secs(2);
    while proxy.open_responses() > 0 && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let num = |k: &str| r.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    let errors: Vec<String> = r
        .get("errors")
        .and_then(serde_json::Value::as_array)
        .map(|a| a.iter().map(ToString::to_string).collect())
        .unwrap_or_default();
    let mut l = Ledger::from_counts(
        usize::try_from(num("ok")).unwrap_or(0),
        usize::try_from(num("hung")).unwrap_or(0),
        errors,
        num("lost"),
        num("duplicated"),
        usize::try_from(num("calls")).unwrap_or(0),
    );
    l.open_after_close = proxy.open_responses();
    l.finish(proxy);
    let failed: Vec<usize> = r
        .get("failedCalls")
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_u64())
                .map(|v| v as usize)
                .collect()
        })
        .unwrap_or_default();
    if kind == Kind::Post {
        l.excuse_stale_resumes(&proxy.log());
        let left = l.excuse_unresumable(&failed, proxy);
        if !left.is_empty() {
            l.errors.push(format!(
                "calls {left:?} failed although their streams could be resumed"
            ));
        }
    }
    if let Some(path) = std::env::var_os("MCP_FAULTS_LOG") {
        let text: String = proxy.log().iter().map(|e| format!("{e:?}\n")).collect();
        let _ = std::fs::write(path, text);
    }
    Ok(l)
}

/// Starts a peer's server (`program rest…`, which prints a line ending in "on `<url>`"), puts
/// the proxy in front of it and runs our client's ledger through it.
async fn against_peer(
    program: &str,
    rest: &[String],
    client: Runtime,
    kind: Kind,
    faults: Faults,
    w: Workload,
) -> Result<Ledger, String> {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(program)
        .args(rest)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn {program}: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(Duration::from_secs(20), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some((_, url)) = line.rsplit_once(" on ") {
                return Some(url.trim().to_owned());
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .ok_or("the peer server printed no URL")?;
    // Keep reading its output so that it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let authority = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .ok_or_else(|| format!("not an http URL: {url}"))?;
    let upstream: std::net::SocketAddr =
        authority.parse().map_err(|e| format!("{authority}: {e}"))?;
    let proxy = Proxy::start(upstream, faults)
        .await
        .map_err(|e| format!("proxy: {e}"))?;
    let mut ledger = mcp_tests::faults::run_client(client, kind, &proxy, w).await;
    let _ = child.kill().await;
    if let Ok(l) = &mut ledger {
        l.excuse_silent_resumes();
    }
    ledger
}

/// The runtime the proxy, the in-process servers and the tokio clients run on (the smol
/// ones bring their own executor).
fn tokio_runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| eprintln!("mcp-faults: no tokio runtime: {e}"))
        .ok()
}

/// The value of `--seed` among `args` (1 when absent or not a number).
fn seed_of(args: &[String]) -> u64 {
    args.iter()
        .position(|a| a == "--seed")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}
